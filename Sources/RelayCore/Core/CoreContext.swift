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
}

/// Everything a loop thread's core needs besides its sockets: the immutable configuration and
/// what was derived from it once (credentials, nonces, policy, relay addresses), plus the
/// node's admission ledger and the tables loops share. Swapped as a whole on reload.
public struct CoreContext: Sendable {
    public var settings: CoreSettings
    public var credentials: CredentialStore
    public var nonces: NonceGenerator
    public var policy: PeerPolicy
    /// Whether an Allocate may take a share of the node: quotas, `bps-capacity`, blocks and the
    /// cluster (docs/architecture.md, "Admission"); shared by all loop threads.
    public var ledger: any AdmissionLedger
    /// EVEN-PORT reservations, shared by all loop threads.
    public var reservationTable: ReservationTable
    /// The relay ports of every relay address, shared by all loop threads: a 508 means the
    /// node has no free port of the family, not that this loop's share ran out.
    public var ports: RelayPortPool
    /// UDP allocations of every loop thread by relayed address, for the cross-thread short-circuit.
    public var directory: RelayedAddressDirectory
    public var relayAddresses: [RelayAddress]
    /// The relay addresses whose advertised form differs from the bound one (`external-ip`).
    public var externalMappings: [RelayAddress]
    public var threadIndex: Int
    public var threadCount: Int
    /// When true, new allocations are refused (drain before shutdown or maintenance).
    public var draining = false
    /// Per-source-IP limits (challenges, failed authentications, allocations), shared by all loop threads.
    public var sourceLimits: SourceLimits
    /// Mobility tickets' keys and which thread holds each mobile allocation (docs/mobility.md).
    public var mobility: MobilityTickets
    /// The peer connections of TCP allocations (RFC 6062), shared by all loop threads: a
    /// ConnectionBind may reach any of them (docs/tcp-relay.md).
    public var tcpConnections = TCPConnectionTable()

    public init(
        settings: CoreSettings, credentials: CredentialStore, nonces: NonceGenerator, policy: PeerPolicy,
        relayAddresses: [RelayAddress], ledger: any AdmissionLedger,
        sourceLimits: SourceLimits, reservationTable: ReservationTable = ReservationTable(),
        directory: RelayedAddressDirectory = RelayedAddressDirectory(), threadIndex: Int = 0, threadCount: Int = 1,
        mobility: MobilityTickets = MobilityTickets(), ports: RelayPortPool? = nil
    ) {
        self.ports =
            ports ?? RelayPortPool(range: settings.minPort...settings.maxPort, addresses: relayAddresses.map(\.bound))
        self.mobility = mobility
        self.settings = settings
        self.credentials = credentials
        self.nonces = nonces
        self.policy = policy
        self.ledger = ledger
        self.reservationTable = reservationTable
        self.directory = directory
        self.relayAddresses = relayAddresses
        externalMappings = relayAddresses.filter { $0.bound != $0.advertised }
        self.threadIndex = threadIndex
        self.threadCount = threadCount
        self.sourceLimits = sourceLimits
    }
}

extension CoreContext {
    /// This core's loop among the node's.
    public var loop: LoopIndex { LoopIndex(threadIndex) }

    /// Whether `port` is in the relay port range (`min-port`...`max-port`).
    @inline(__always)
    func isRelayPort(_ port: UInt16) -> Bool { port >= settings.minPort && port <= settings.maxPort }

    /// A peer address in the advertised (`external-ip` public) form of one of relayd's own
    /// relayed addresses (a relay address, a port in the relay port range), turned into the bound
    /// form, so relay-to-relay traffic across loop threads stays on the host where a 1:1 NAT does
    /// not hairpin. Every other address is returned unchanged: a peer on another port of the
    /// host is reached at the address the client named, as without `external-ip`
    /// (docs/external-ip.md).
    @inline(__always)
    func boundForm(of peer: TransportAddress) -> TransportAddress {
        guard isRelayPort(peer.port) else { return peer }
        for mapping in externalMappings where mapping.advertised == peer.ip {
            return TransportAddress(ip: mapping.bound, port: peer.port)
        }
        return peer
    }

    /// The source of a packet from one of relayd's own relay sockets (a bound relay address, a
    /// port in the relay port range) in the advertised form its clients know (what a hairpinning
    /// NAT would have shown); nil for every other source, which keeps the address it really has
    /// (a media server or test peer that shares the host, reached on its private address).
    @inline(__always)
    func advertisedForm(of peer: TransportAddress) -> TransportAddress? {
        guard isRelayPort(peer.port) else { return nil }
        for mapping in externalMappings where mapping.bound == peer.ip {
            return TransportAddress(ip: mapping.advertised, port: peer.port)
        }
        return nil
    }
}
