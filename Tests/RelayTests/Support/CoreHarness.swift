import Logging
import Relay
import RelayCore
import StunCodec

/// The configuration the core tests share: REST credentials (`use-auth-secret`) plus one
/// static user, a private relay address, a small relay port range, and a clock in unix seconds.
enum CoreFixture {
    static let realm = "example.org"
    static let secret = "core-tests-rest-secret"
    /// Unix time the manual clock starts at; REST usernames are judged against it.
    static let start: Int64 = 1_700_000_000
    static let relayIP = IPAddress.literal("10.0.0.5")
    static let server = TransportAddress.literal("10.0.0.5:3478")
    static let listenerSocket: Int32 = 3
    static let staticUser = "bob"
    static let staticPassword = "bob-password"
    static let minPort: UInt16 = 50000
    static let maxPort: UInt16 = 50009

    /// Clients (never policy-checked) and public peers.
    static let clientA = TransportAddress.literal("192.0.2.1:40001")
    static let clientB = TransportAddress.literal("192.0.2.2:40002")
    static let peer1 = TransportAddress.literal("1.2.3.4:5000")
    static let peer2 = TransportAddress.literal("5.6.7.8:6000")

    static func configuration(_ adjust: (inout RelayConfiguration) -> Void = { _ in }) -> RelayConfiguration {
        var c = RelayConfiguration()
        c.realm = realm
        c.useAuthSecret = true
        c.staticAuthSecrets = [secret]
        c.users = [.init(name: staticUser, credential: .password(staticPassword))]
        c.listeningIPs = [server.ip]
        c.listeningPort = server.port
        c.relayIPs = [relayIP]
        c.minPort = minPort
        c.maxPort = maxPort
        adjust(&c)
        return c
    }

    /// The node-wide relay port pool of `configuration`, for several loops of one node.
    static func portPool(_ configuration: RelayConfiguration = configuration()) -> RelayPortPool {
        RelayPortPool(
            range: configuration.minPort...configuration.maxPort,
            addresses: RelayAddress.mappings(configuration: configuration).map(\.bound))
    }

    /// A TURN REST username `<expiry>:<user>` valid for `validFor` seconds after the clock start.
    static func restUsername(_ user: String = "alice", validFor: Int64 = 86_400) -> String {
        "\(start + validFor):\(user)"
    }

    /// The REST password coturn's `use-auth-secret` derives: base64(HMAC-SHA1(secret, username)).
    static func restPassword(_ username: String, secret: String = secret) -> String {
        KeyDerivation.restPassword(secret: secret, username: username)
    }

    /// A logger that drops everything, so test output stays readable.
    static let quietLogger = Logger(label: "relayd.core-tests") { _ in SwiftLogNoOpLogHandler() }
}

/// One packet the core queued, copied out of the outbox before it was reset.
struct SentPacket {
    var route: Route
    var bytes: [UInt8]
    /// Must leave unfragmented, DF set (a Send indication's DONT-FRAGMENT).
    var dontFragment = false

    /// The client this packet goes back to, for `.client` routes.
    var client: TransportAddress? {
        if case .client(let origin) = route { return origin.fiveTuple.client }
        return nil
    }

    /// The relay socket and peer, for `.peer` routes.
    var peer: (relaySocket: RelaySocket, peer: TransportAddress)? {
        if case .peer(let socket, let peer) = route { return (socket, peer) }
        return nil
    }
}

/// A `RelayCore` with fake relay sockets and a manual clock: packets in, copies of the outbox out.
final class CoreHarness {
    let sockets = FakeRelaySocketProvider()
    let core: RelayCore
    /// The node's own admission (quotas, `bps-capacity`, blocks).
    let admission: LocalAdmissionLedger
    var now: Int64
    let configuration: RelayConfiguration

    init(
        configuration: RelayConfiguration = CoreFixture.configuration(), now: Int64 = CoreFixture.start,
        interfaceAddresses: [IPAddress] = [], loop: LoopPlacement? = nil, seed: UInt64? = nil,
        ledger: ((LocalAdmissionLedger) -> any AdmissionLedger)? = nil
    ) {
        self.configuration = configuration
        self.now = now
        admission = loop?.admission ?? LocalAdmissionLedger(limits: .init(configuration: configuration))
        let context = CoreContext(
            configuration: configuration, nonceKey: Array(0..<32), ledger: ledger?(admission) ?? admission,
            reservationTable: loop?.reservations ?? ReservationTable(), directory: loop?.directory ?? RelayedAddressDirectory(), interfaceAddresses: interfaceAddresses,
            threadIndex: loop?.index ?? 0, threadCount: loop?.count ?? 1,
            mobility: loop?.mobility ?? MobilityTickets(), ports: loop?.ports)
        core = RelayCore(context: context, sockets: sockets, logger: CoreFixture.quietLogger, seed: seed)
        core.addUDPListener(CoreFixture.server, socket: listenerSocket)
    }

    /// One of several loop threads sharing an admission ledger and the relayed-address directory.
    struct LoopPlacement {
        var index: Int
        var count: Int
        var admission: LocalAdmissionLedger
        var directory: RelayedAddressDirectory
        var mobility: MobilityTickets? = nil
        /// The node's relay ports, which loops of one node share (nil: a pool of this loop's own).
        var ports: RelayPortPool? = nil
        /// EVEN-PORT reservations, which loops of one node share.
        var reservations = ReservationTable()
    }

    /// The UDP listener this harness's loop answers from (one per loop, as with SO_REUSEPORT).
    var listenerSocket: ClientSocket {
        ClientSocket(descriptor: CoreFixture.listenerSocket + Int32(core.context.threadIndex))
    }

    var counters: CoreCounters { core.counters }

    func origin(_ client: TransportAddress, transport: TransportProtocol = .udp) -> ClientOrigin {
        ClientOrigin(
            fiveTuple: FiveTuple(client: client, server: CoreFixture.server, transport: transport),
            socket: listenerSocket)
    }

    /// Hands `bytes` to the core as one datagram (or stream frame) from `client`; returns what it queued.
    @discardableResult
    func receive(_ bytes: [UInt8], from client: TransportAddress, transport: TransportProtocol = .udp) -> [SentPacket] {
        let origin = origin(client, transport: transport)
        return bytes.withUnsafeBytes { raw in
            core.handleClientPacket(raw, from: origin, now: now)
            return drainOutbox()
        }
    }

    /// Hands the core a UDP datagram from `peer` that arrived at `relaySocket`, laid out the way
    /// the I/O layer reads it: `peerHeadroom` free bytes, the payload, `peerTailroom` free bytes.
    @discardableResult
    func receiveFromPeer(_ payload: [UInt8], from peer: TransportAddress, at relaySocket: RelaySocket) -> [SentPacket] {
        var buffer = [UInt8](repeating: 0xA5, count: RelayCore.peerHeadroom + payload.count + RelayCore.peerTailroom)
        buffer.replaceSubrange(RelayCore.peerHeadroom..<RelayCore.peerHeadroom + payload.count, with: payload)
        return buffer.withUnsafeMutableBytes { raw in
            core.handlePeerPacket(
                relaySocket: relaySocket, from: peer, buffer: raw,
                payload: RelayCore.peerHeadroom..<RelayCore.peerHeadroom + payload.count, now: now)
            return drainOutbox()
        }
    }

    /// Copies every queued packet out (they may point into the caller's buffer), executes the
    /// commands as the I/O layer would (closes relay sockets, queues stream deliveries on
    /// `RecordingStreamSink`s, records channel routes and session summaries), and resets the outbox.
    func drainOutbox() -> [SentPacket] {
        let packets = core.outbox.packets.map {
            SentPacket(route: $0.route, bytes: Array($0.bytes), dontFragment: $0.dontFragment)
        }
        for command in core.outbox.commands {
            switch command {
            case .closeRelaySocket(let socket):
                sockets.closeRelaySocket(socket)
            case .setDontFragment(let socket):
                dontFragment.append(socket)
            case .deliverToStream(let delivery):
                let sink = delivery.sink as? RecordingStreamSink
                if sink?.take(delivery.bytes) != true { core.streamDeliveryRefused(delivery, now: now) }
            case .installChannel(let route):
                channelCommands.append(.install(route))
            case .removeChannel(let route):
                channelCommands.append(.remove(route))
            case .sessionStarted:
                started += 1
            case .sessionEnded(let summary):
                sessions.append(summary)
            case .forwardRequest(let request):
                forwarded.append(request)
            case .steerClient(_, let from, let to):
                steering.append(Steering(from: from, to: to))
            case .connectPeer(let request):
                connects.append(request)
            case .bindDataConnection(let bind):
                dataBinds.append(bind)
            }
        }
        core.outbox.reset()
        return packets
    }

    /// Connects and ConnectionBinds of TCP allocations the core asked the I/O layer for (RFC 6062), in order.
    var connects: [PeerConnect] = []
    var dataBinds: [DataConnectionBind] = []

    /// Hands the core the ledger's decision on a pending Allocate, as the loop does when it
    /// arrives in its mailbox.
    @discardableResult
    func resume(_ ticket: AdmissionTicket, _ decision: AdmissionDecision) -> [SentPacket] {
        core.resumeAllocate(ticket, decision: decision, now: now)
        return drainOutbox()
    }

    /// Requests the core handed to another loop thread (mobility), in order.
    var forwarded: [ForwardedRequest] = []

    /// A moved client's 5-tuple the core asked the I/O layer to receive (and the one to stop).
    struct Steering: Equatable {
        var from: FiveTuple
        var to: FiveTuple?
    }
    var steering: [Steering] = []

    /// The relay sockets the core asked to send without fragmenting (DONT-FRAGMENT), in order.
    var dontFragment: [RelaySocket] = []

    /// A channel route command, as a data plane outside the core would receive it.
    enum ChannelCommand: Equatable {
        case install(ChannelRoute)
        case remove(ChannelRoute)
    }

    /// Every channel route command the core emitted, in order.
    var channelCommands: [ChannelCommand] = []
    /// Allocations whose start the core announced.
    var started = 0
    /// Every session summary the core emitted, in order.
    var sessions: [SessionSummary] = []

    func advance(to second: Int64) { now = second }
    func advance(by seconds: Int64) { now += seconds }

    /// The once-a-second sweep, its commands executed as the I/O layer would.
    func sweep() {
        core.sweep(now: now)
        _ = drainOutbox()
    }

    /// The allocation of `client`'s UDP 5-tuple.
    func allocation(of client: TransportAddress, transport: TransportProtocol = .udp) -> Allocation? {
        core.allocation(for: origin(client, transport: transport).fiveTuple)
    }

    /// A client at `client` using the REST credential for `user` (or `username`/`password` when given).
    func restClient(
        at client: TransportAddress, user: String = "alice", validFor: Int64 = 86_400,
        secret: String = CoreFixture.secret,
        transport: TransportProtocol = .udp
    ) -> TurnTestClient {
        let username = CoreFixture.restUsername(user, validFor: validFor)
        return self.client(
            at: client, username: username, password: CoreFixture.restPassword(username, secret: secret),
            transport: transport)
    }

    /// A client at `client` with explicit long-term credentials.
    func client(
        at client: TransportAddress, username: String, password: String, transport: TransportProtocol = .udp
    ) -> TurnTestClient {
        TurnTestClient(username: username, password: password) { [self] bytes in
            try self.receive(bytes, from: client, transport: transport).first { $0.client == client }.map {
                try ReceivedStun($0.bytes)
            }
        }
    }
}
