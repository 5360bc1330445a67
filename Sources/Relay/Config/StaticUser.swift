extension RelayConfiguration {
    /// A long-term credential from a `user=` line (RFC 8489 §9.2).
    public struct StaticUser: Hashable, Sendable {
        /// The password, or the precomputed key MD5(username ":" realm ":" password).
        public enum Credential: Hashable, Sendable {
            case password(String)
            /// 16 bytes, from `user=name:0x<32 hex digits>`.
            case key([UInt8])
        }

        public var name: String
        public var credential: Credential

        public init(name: String, credential: Credential) {
            self.name = name
            self.credential = credential
        }
    }
}
