import RelayCore
import StunCodec

extension TenantTable {
    /// The core's tenants from the tenant files (docs/tenants.md): each one's credentials under
    /// its realm (its `user=` lines, its secrets, and the user database's rows of its realm),
    /// its REST secrets under the main realm for addresses tenants share, its peer policy (the
    /// main file's ranges with its own: its denials added, its allowances first), and how
    /// clients reach it.
    public init(configuration c: RelayConfiguration, interfaceAddresses: [IPAddress], database: UserDatabaseView?) {
        var tenants: [Tenant] = []
        var byListener: [IPAddress: Int] = [:]
        var byOrigin: [String: Int] = [:]
        var byServerName: [String: Int] = [:]
        for (i, tenant) in c.tenants.enumerated() {
            var own = tenant.configuration
            own.realm = tenant.realm
            own.restAPISeparator = c.restAPISeparator
            own.useAuthSecret = own.useAuthSecret || !own.staticAuthSecrets.isEmpty
            var scoped = c
            scoped.deniedPeerIPs = c.deniedPeerIPs + own.deniedPeerIPs
            scoped.allowedPeerIPs = own.allowedPeerIPs + c.allowedPeerIPs
            let shared = CredentialStore(
                realm: c.realm, users: [:], restSecrets: own.staticAuthSecrets, separator: c.restAPISeparator)
            tenants.append(
                Tenant(
                    name: tenant.name, credentials: CredentialStore(configuration: own, database: database),
                    sharedCredentials: shared,
                    policy: PeerPolicy(configuration: scoped, interfaceAddresses: interfaceAddresses),
                    maxBPS: tenant.maxBPS(main: c), crossTenantRelay: own.crossTenantRelay))
            for ip in own.listeningIPs { byListener[ip.reducedToIPv4] = i + 1 }
            for origin in own.origins { byOrigin[origin] = i + 1 }
            for name in own.serverNames { byServerName[name] = i + 1 }
        }
        // coturn's `turn_origin_to_realm`: an ORIGIN the database maps to a tenant's realm.
        if let database {
            for (origin, realm) in database.originToRealm where byOrigin[origin] == nil {
                if let i = c.tenants.firstIndex(where: { $0.realm == realm }) { byOrigin[origin] = i + 1 }
            }
        }
        self.init(
            tenants: tenants, byListener: byListener, byOrigin: byOrigin, byServerName: byServerName,
            defaultCrossTenantRelay: c.crossTenantRelay)
    }
}
