/// relayd's version, reported in logs and (when enabled) in SOFTWARE (RFC 8489 §14.14).
public enum RelaydVersion {
    public static let string = "relayd 0.1.0"
}
