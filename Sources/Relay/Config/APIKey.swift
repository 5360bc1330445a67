extension RelayConfiguration {
    /// A bearer token accepted by the HTTP API, from `api-key=name:token[:admin]`
    /// (docs/admin.md).
    public struct APIKey: Hashable, Sendable {
        /// What a key may do: mint credentials, or that and the admin API.
        public enum Scope: String, Sendable {
            case credentials
            case admin
        }

        /// Names the caller in logs; never the token.
        public var name: String
        public var token: String
        public var scope: Scope
        /// The tenant it belongs to, when a tenant file defines it (docs/tenants.md): it vends
        /// that tenant's credentials and sees and ends only that tenant's sessions. Nil: the
        /// operator's, for every tenant.
        public var tenant: String?

        public init(name: String, token: String, scope: Scope = .credentials, tenant: String? = nil) {
            self.name = name
            self.token = token
            self.scope = scope
            self.tenant = tenant
        }
    }
}
