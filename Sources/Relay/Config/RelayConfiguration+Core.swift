import RelayCore
import StunCodec

// What the protocol core gets from the configuration: the narrow `CoreSettings` and the values
// derived once per load (credentials, policy, limits, relay addresses). The core target never
// sees `RelayConfiguration` (docs/architecture.md).

extension CoreSettings {
    public init(configuration c: RelayConfiguration) {
        self.init()
        minPort = c.minPort
        maxPort = c.maxPort
        maxAllocateLifetime = c.maxAllocateLifetime
        channelLifetime = c.channelLifetime
        permissionLifetime = c.permissionLifetime
        maxPermissionsPerAllocation = c.maxPermissionsPerAllocation
        tcpRelay = !c.noTCPRelay
        maxTCPConnectionsPerAllocation = c.maxTCPRelayConnections
        maxBPS = c.maxBPS
        noAuth = c.noAuth
        stunOnly = c.stunOnly
        noStun = c.noStun
        rfc5780 = c.rfc5780Active
        rfc3489Compatibility = c.rfc3489Compatibility
        stunBackwardCompatibility = c.stunBackwardCompatibility
        fingerprint = c.fingerprint
        mobility = c.mobility
        // coturn's user database holds MD5 keys, from which no SHA-256 key can be derived: with
        // one, MD5 comes first, so a client that can do both picks the one its key verifies with
        // (docs/userdb.md).
        passwordAlgorithms =
            !c.hasUserDatabase || !c.passwordAlgorithms.contains(.md5)
            ? c.passwordAlgorithms : [.md5] + c.passwordAlgorithms.filter { $0 != .md5 }
        lookUpUnknownUsers = c.hasUserDatabase
        softwareAttribute = c.softwareAttribute
        alternateServers = c.alternateServers
        logLevel = c.logLevel
    }
}

extension CoreContext {
    /// The context of loop thread `threadIndex` of `threadCount` for `configuration`; the ledger
    /// and the shared tables are passed in so every loop thread counts against the same ones.
    public init(
        configuration: RelayConfiguration, nonceKey: [UInt8], ledger: any AdmissionLedger,
        reservationTable: ReservationTable = ReservationTable(),
        directory: RelayedAddressDirectory = RelayedAddressDirectory(), interfaceAddresses: [IPAddress] = [],
        threadIndex: Int = 0, threadCount: Int = 1, sourceLimits: SourceLimits? = nil,
        mobility: MobilityTickets = MobilityTickets(), ports: RelayPortPool? = nil,
        tcpConnections: TCPConnectionTable = TCPConnectionTable()
    ) {
        self.init(
            settings: CoreSettings(configuration: configuration),
            credentials: CredentialStore(configuration: configuration),
            nonces: NonceGenerator(key: nonceKey, lifetime: Int64(configuration.staleNonce)),
            policy: PeerPolicy(configuration: configuration, interfaceAddresses: interfaceAddresses),
            relayAddresses: RelayAddress.mappings(configuration: configuration), ledger: ledger,
            sourceLimits: sourceLimits ?? SourceLimits(configuration: configuration),
            reservationTable: reservationTable, directory: directory, threadIndex: threadIndex,
            threadCount: threadCount, mobility: mobility, ports: ports, tcpConnections: tcpConnections)
        tenants = TenantTable(configuration: configuration, interfaceAddresses: interfaceAddresses, database: nil)
    }
}

extension LocalAdmissionLedger.Limits {
    /// `user-quota`, `total-quota` and `bps-capacity`, and each tenant's (docs/tenants.md).
    public init(configuration c: RelayConfiguration) {
        var tenants: [String: TenantLimits] = [:]
        for tenant in c.tenants {
            let t = tenant.configuration
            tenants[tenant.name] = TenantLimits(
                userQuota: tenant.userQuota, totalQuota: t.totalQuota, bpsCapacity: t.bpsCapacity,
                reservedAllocations: t.reserveAllocations, reservedBPS: t.reserveBPS)
        }
        self.init(userQuota: c.userQuota, totalQuota: c.totalQuota, bpsCapacity: c.bpsCapacity, tenants: tenants)
    }
}

extension RelayAddress {
    /// Pairs each `relay-ip` with its `external-ip` (`pub/priv` by private address; a lone `pub`
    /// applies to every relay address of its family).
    public static func mappings(configuration c: RelayConfiguration) -> [RelayAddress] {
        c.relayIPs.map { ip in
            if let exact = c.externalIPs.first(where: { $0.privateIP == ip }) {
                return RelayAddress(bound: ip, advertised: exact.publicIP)
            }
            if let lone = c.externalIPs.first(where: { $0.privateIP == nil && $0.publicIP.family == ip.family }) {
                return RelayAddress(bound: ip, advertised: lone.publicIP)
            }
            return RelayAddress(bound: ip, advertised: ip)
        }
    }
}

extension CredentialStore {
    /// Static users from `user=` lines (passwords prepared with OpaqueString, RFC 8489 §9.2.2)
    /// and, with `use-auth-secret`, the REST secrets.
    public init(configuration c: RelayConfiguration) {
        var table: [String: [UInt8]] = [:]
        var sha256: [String: [UInt8]] = [:]
        for user in c.users {
            switch user.credential {
            case .key(let key):
                table[user.name] = key
            case .password(let password):
                (table[user.name], sha256[user.name]) = Self.longTermKeys(name: user.name, realm: c.realm, password: password)
            }
        }
        self.init(
            realm: c.realm, users: table, sha256Users: sha256, restSecrets: c.useAuthSecret ? c.staticAuthSecrets : [],
            separator: c.restAPISeparator)
    }

    /// A user's long-term keys from its password, prepared with OpaqueString (RFC 8265): MD5
    /// and SHA-256 of name ":" realm ":" password (RFC 8489 §9.2.2).
    static func longTermKeys(name: String, realm: String, password: String) -> (md5: [UInt8], sha256: [UInt8]) {
        let prepared = OpaqueString.prepare(password)
        return (
            KeyDerivation.longTermKeyMD5(username: name, realm: realm, password: prepared),
            KeyDerivation.longTermKeySHA256(username: Array(name.utf8), realm: Array(realm.utf8), password: Array(prepared.utf8))
        )
    }

    /// The configuration's users and secrets, and those coturn's user database holds for the
    /// configured realm (docs/userdb.md): a `user=` line wins over a database row of the same
    /// name; the database's REST secrets count with `use-auth-secret`, beside the configured ones.
    public init(configuration c: RelayConfiguration, database: UserDatabaseView?) {
        guard let realm = database?.realms[c.realm] else {
            self.init(configuration: c)
            return
        }
        let configured = CredentialStore(configuration: c)
        var md5 = realm.md5Keys
        var sha256 = realm.sha256Keys
        // A user known only by a SHA-256 key is listed with no MD5 key: an MD5 client gets 401.
        for name in sha256.keys where md5[name] == nil { md5[name] = [] }
        for (name, key) in configured.users {
            md5[name] = key
            sha256[name] = configured.sha256Users[name]
        }
        var secrets = configured.restSecrets
        if c.useAuthSecret { secrets += realm.secrets.filter { !secrets.contains($0) } }
        self.init(realm: c.realm, users: md5, sha256Users: sha256, restSecrets: secrets, separator: c.restAPISeparator)
    }
}

extension PeerPolicy {
    /// Builds the policy from the configuration plus the host's own interface addresses.
    public init(configuration c: RelayConfiguration, interfaceAddresses: [IPAddress]) {
        var own = Set(c.listeningIPs + c.relayIPs + interfaceAddresses)
        own.formUnion(c.externalIPs.map(\.publicIP))
        own.formUnion(c.externalIPs.compactMap(\.privateIP))
        var ports: Set<UInt16> = [c.listeningPort, c.tlsListeningPort, c.apiListeningPort]
        if let p = c.effectiveAltListeningPort { ports.insert(p) }
        if let p = c.altTLSListeningPort { ports.insert(p) }
        if c.prometheus { ports.insert(c.prometheusPort) }
        var relays = Set(c.relayIPs)
        relays.formUnion(c.externalIPs.map(\.publicIP))
        self.init(
            denied: c.deniedPeerIPs, allowed: c.allowedPeerIPs, allowLoopback: c.allowLoopbackPeers,
            ownAddresses: own, servicePorts: ports, relayAddresses: relays, relayPorts: c.minPort...c.maxPort)
    }
}

extension SourceLimits {
    public init(configuration c: RelayConfiguration) {
        self.init(
            challenges: SourceRateLimiter(perSecond: c.unauthRateLimit, burst: c.unauthRateBurst),
            failures: SourceRateLimiter(perSecond: c.authFailureRateLimit),
            allocations: SourceRateLimiter(perSecond: c.allocateRateLimit))
    }

    /// After a reload: a limiter whose settings changed starts afresh, the others keep their buckets.
    public func updated(from previous: RelayConfiguration, to next: RelayConfiguration) -> SourceLimits {
        let fresh = SourceLimits(configuration: next)
        var kept = self
        if next.unauthRateLimit != previous.unauthRateLimit || next.unauthRateBurst != previous.unauthRateBurst {
            kept.challenges = fresh.challenges
        }
        if next.authFailureRateLimit != previous.authFailureRateLimit { kept.failures = fresh.failures }
        if next.allocateRateLimit != previous.allocateRateLimit { kept.allocations = fresh.allocations }
        return kept
    }
}

extension RelayConfiguration {
    /// Whether users come from one of coturn's user databases (docs/userdb.md).
    public var hasUserDatabase: Bool { userDatabase != nil || postgresUserDatabase != nil || redisUserDatabase != nil }
}
