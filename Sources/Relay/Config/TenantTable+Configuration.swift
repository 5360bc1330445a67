import RelayCore
import StunCodec

/// Each tenant name's index for the life of the process (docs/tenants.md): the first
/// configuration that names a tenant gives it the next free index, and no reload changes it.
enum TenantIndexes {
    private static let registry = Locked<[String: Int]>([:])

    static func index(of name: String) -> Int {
        registry.withLock { table in
            if let known = table[name] { return known }
            let next = table.count + 1
            table[name] = next
            return next
        }
    }
}

extension TenantTable {
    /// The core's tenants from the tenant files (docs/tenants.md): each one's credentials under
    /// its realm (its `user=` lines, its secrets, and the user database's rows of its realm),
    /// its REST secrets under the main realm for addresses tenants share, its peer policy (the
    /// main file's ranges with its own: its denials added, its allowances first), and how
    /// clients reach it.
    public init(configuration c: RelayConfiguration, interfaceAddresses: [IPAddress], database: UserDatabaseView?) {
        var slots: [Tenant?] = []
        var order: [Int] = []
        var byListener: [IPAddress: Int] = [:]
        var byOrigin: [String: Int] = [:]
        var byServerName: [String: Int] = [:]
        for tenant in c.tenants {
            let index = TenantIndexes.index(of: tenant.name)
            order.append(index)
            if slots.count < index { slots += Array(repeating: nil, count: index - slots.count) }
            var own = tenant.configuration
            own.realm = tenant.realm
            own.restAPISeparator = c.restAPISeparator
            own.useAuthSecret = own.useAuthSecret || !own.staticAuthSecrets.isEmpty
            var scoped = c
            scoped.deniedPeerIPs = c.deniedPeerIPs + own.deniedPeerIPs
            scoped.allowedPeerIPs = own.allowedPeerIPs + c.allowedPeerIPs
            let credentials = CredentialStore(configuration: own, database: database)
            // Its secrets from the file and from the user database alike.
            let shared = CredentialStore(
                realm: c.realm, users: [:], restSecrets: credentials.restSecrets, separator: c.restAPISeparator)
            slots[index - 1] = Tenant(
                name: tenant.name, credentials: credentials, sharedCredentials: shared,
                policy: PeerPolicy(configuration: scoped, interfaceAddresses: interfaceAddresses),
                maxBPS: tenant.maxBPS(main: c), crossTenantRelay: own.crossTenantRelay)
            for ip in own.listeningIPs { byListener[ip.reducedToIPv4] = index }
            for origin in own.origins { byOrigin[origin] = index }
            for name in own.serverNames { byServerName[name] = index }
        }
        // coturn's `turn_origin_to_realm`: an ORIGIN the database maps to a tenant's realm.
        if let database {
            for (origin, realm) in database.originToRealm where byOrigin[origin] == nil {
                if let tenant = c.tenants.first(where: { $0.realm == realm }) {
                    byOrigin[origin] = TenantIndexes.index(of: tenant.name)
                }
            }
        }
        self.init(
            slots: slots, order: order, byListener: byListener, byOrigin: byOrigin, byServerName: byServerName,
            defaultCrossTenantRelay: c.crossTenantRelay)
    }
}
