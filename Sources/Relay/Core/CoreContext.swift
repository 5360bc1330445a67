import StunCodec

/// A relay address: the IP relay sockets bind to, and the IP clients are told (its `external-ip`
/// public form behind 1:1 NAT, else the same).
public struct RelayAddress: Sendable, Hashable {
    public var bound: IPAddress
    public var advertised: IPAddress

    public init(bound: IPAddress, advertised: IPAddress) {
        self.bound = bound
        self.advertised = advertised
    }

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

/// Everything a loop thread's core needs besides its sockets: the immutable configuration and
/// what was derived from it once (credentials, nonces, policy, relay addresses), plus the
/// cross-thread quota tracker. Swapped as a whole on reload.
public struct CoreContext: Sendable {
    public var configuration: RelayConfiguration
    public var credentials: CredentialStore
    public var nonces: NonceGenerator
    public var policy: PeerPolicy
    public var quota: QuotaTracker
    /// EVEN-PORT reservations, shared by all loop threads.
    public var reservationTable: ReservationTable
    public var relayAddresses: [RelayAddress]
    public var threadIndex: Int
    public var threadCount: Int
    /// When true, new allocations are refused (drain before shutdown or maintenance).
    public var draining = false
    /// 401/438 challenges per source IP (`unauth-rate-limit`), shared by all loop threads.
    public var challengeLimiter: SourceRateLimiter
    /// New allocations per source IP (`allocate-rate-limit`), shared by all loop threads.
    public var allocationLimiter: SourceRateLimiter

    public init(
        configuration: RelayConfiguration, nonceKey: [UInt8], quota: QuotaTracker,
        reservationTable: ReservationTable = ReservationTable(), interfaceAddresses: [IPAddress] = [],
        threadIndex: Int = 0, threadCount: Int = 1, challengeLimiter: SourceRateLimiter? = nil,
        allocationLimiter: SourceRateLimiter? = nil
    ) {
        self.configuration = configuration
        credentials = CredentialStore(configuration: configuration)
        nonces = NonceGenerator(key: nonceKey, lifetime: Int64(configuration.staleNonce))
        policy = PeerPolicy(configuration: configuration, interfaceAddresses: interfaceAddresses)
        self.quota = quota
        self.reservationTable = reservationTable
        relayAddresses = RelayAddress.mappings(configuration: configuration)
        self.threadIndex = threadIndex
        self.threadCount = threadCount
        self.challengeLimiter = challengeLimiter ?? SourceRateLimiter(perSecond: configuration.unauthRateLimit)
        self.allocationLimiter = allocationLimiter ?? SourceRateLimiter(perSecond: configuration.allocateRateLimit)
    }
}
