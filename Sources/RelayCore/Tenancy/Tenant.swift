import StunCodec

/// One tenant of a shared relay (docs/tenants.md): a realm with its own credentials, peer
/// policy and `max-bps`. Tenant 0 is the default one, the configuration's own realm, secrets and
/// users; it is the only tenant of a configuration that names none, which then behaves as it
/// always did.
public struct Tenant: Sendable {
    /// The name the configuration gives it (`tenant=`), its label on metrics and its prefix in
    /// quota and block keys; empty for the default tenant.
    public var name: String
    /// Its long-term credentials under its own realm (RFC 8489 §9.2): static users, users of the
    /// user database's realm, and REST secrets. Used when the client reached the tenant by
    /// listener address, TLS server name or ORIGIN, so that its 401 carried this realm.
    public var credentials: CredentialStore
    /// Its REST secrets under the default tenant's realm: what a credential of this tenant is
    /// checked with on an address tenants share, where the 401 carried the default realm
    /// (docs/tenants.md, "Telling tenants apart by the credential").
    public var sharedCredentials: CredentialStore
    public var policy: PeerPolicy
    /// `max-bps` of each of its allocations; 0: unlimited.
    public var maxBPS: Int
    /// Whether its allocations may relay to another tenant's that allows it too
    /// (`cross-tenant-relay`); tenants are isolated by default.
    public var crossTenantRelay: Bool

    public init(
        name: String, credentials: CredentialStore, sharedCredentials: CredentialStore, policy: PeerPolicy,
        maxBPS: Int, crossTenantRelay: Bool
    ) {
        self.name = name
        self.credentials = credentials
        self.sharedCredentials = sharedCredentials
        self.policy = policy
        self.maxBPS = maxBPS
        self.crossTenantRelay = crossTenantRelay
    }

    /// The user id quotas and blocks count for `username`: the REST user id or static name, behind
    /// `<tenant>/` for every tenant but the default one, so two tenants' users named alike are two
    /// users (docs/tenants.md).
    public func quotaUser(of username: String) -> String {
        let id = credentials.userID(of: username)
        return name.isEmpty ? String(id) : name + "/" + id
    }
}
