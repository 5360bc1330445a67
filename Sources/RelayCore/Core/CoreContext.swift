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

/// Everything a loop thread's core needs besides its sockets, in two parts
/// (docs/architecture.md, "Who owns what"): the immutable configuration and what was derived
/// from it once (settings, credentials, nonces, peer policy, relay addresses, per-source
/// limits), swapped as a whole on reload; and `tables`, the node's shared tables, which a core
/// gets once, when it is made, and keeps.
public struct CoreContext: Sendable {
    public var settings: CoreSettings
    public var credentials: CredentialStore
    public var nonces: NonceGenerator
    public var policy: PeerPolicy
    public var relayAddresses: [RelayAddress]
    /// The relay addresses whose advertised form differs from the bound one (`external-ip`).
    public var externalMappings: [RelayAddress]
    public var threadIndex: Int
    public var threadCount: Int
    /// When true, new allocations are refused (drain before shutdown or maintenance).
    public var draining = false
    /// Per-source-IP limits (challenges, failed authentications, allocations), shared by all
    /// loop threads; a reload that changes a rate makes new ones.
    public var sourceLimits: SourceLimits
    /// The tenants besides the default one, and how clients reach them (docs/tenants.md);
    /// `.single` when the configuration names none.
    public var tenants: TenantTable = .single
    /// The node's shared tables; `RelayCore.tables` holds the ones its core was made with.
    public let tables: NodeTables

    public init(
        settings: CoreSettings, credentials: CredentialStore, nonces: NonceGenerator, policy: PeerPolicy,
        relayAddresses: [RelayAddress], ledger: any AdmissionLedger,
        sourceLimits: SourceLimits, reservationTable: ReservationTable = ReservationTable(),
        directory: RelayedAddressDirectory = RelayedAddressDirectory(), threadIndex: Int = 0, threadCount: Int = 1,
        mobility: MobilityTickets = MobilityTickets(), ports: RelayPortPool? = nil,
        tcpConnections: TCPConnectionTable = TCPConnectionTable()
    ) {
        tables = NodeTables(
            ledger: ledger,
            ports: ports ?? RelayPortPool(range: settings.minPort...settings.maxPort, addresses: relayAddresses.map(\.bound)),
            directory: directory, reservations: reservationTable, mobility: mobility, tcpConnections: tcpConnections)
        self.settings = settings
        self.credentials = credentials
        self.nonces = nonces
        self.policy = policy
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
