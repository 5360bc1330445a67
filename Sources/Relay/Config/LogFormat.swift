extension RelayConfiguration {
    /// How log lines are written.
    public enum LogFormat: String, Hashable, Sendable {
        /// Human-readable lines.
        case text
        /// One JSON object per line.
        case json
    }
}
