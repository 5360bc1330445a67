extension RelayConfiguration {
    /// How log lines are written.
    public enum LogFormat: String, Hashable, Sendable {
        /// Human-readable lines.
        case text
        /// One JSON object per line.
        case json
    }
}

extension RelayConfiguration {
    /// Whether established channels are relayed in the kernel (`kernel-offload`,
    /// docs/kernel-fast-path.md).
    public enum KernelOffload: String, Hashable, Sendable {
        /// Always in user space.
        case off
        /// In the kernel when the kernel and privileges allow; otherwise relayd says once why not
        /// and relays in user space.
        case auto
        /// In the kernel, or relayd does not start.
        case on
    }
}
