/// Fixed values of the STUN header (RFC 8489 §5).
public enum StunConstants {
    /// The magic cookie, 0x2112A442 in network order (RFC 8489 §5).
    public static let magicCookie: UInt32 = 0x2112_A442
    /// Size of the STUN header in bytes.
    public static let headerLength = 20
    /// Size of an attribute's type-length header.
    public static let attributeHeaderLength = 4
    /// FINGERPRINT's XOR constant, "STUN" in ASCII (RFC 8489 §14.7).
    public static let fingerprintXOR: UInt32 = 0x5354_554E
}
