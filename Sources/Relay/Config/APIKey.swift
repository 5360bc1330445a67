extension RelayConfiguration {
    /// A bearer token accepted by the credential service, from `api-key=name:token`.
    public struct APIKey: Hashable, Sendable {
        /// Names the caller in logs; never the token.
        public var name: String
        public var token: String

        public init(name: String, token: String) {
            self.name = name
            self.token = token
        }
    }
}
