import Logging
import RelayCore
import StunCodec

/// What the core tests share: REST credentials (`use-auth-secret`) plus one static user, a
/// private relay address, a small relay port range, and a clock in unix seconds. Built from the
/// core's own types (`CoreSettings`, `CredentialStore`, `PeerPolicy`, `RelayAddress`, ...) the
/// way `Relay` builds them from a `RelayConfiguration` (`RelayConfiguration+Core.swift`); a test
/// changes `Options`, the default fixture plus its change.
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

    /// What a core test may change: the core's settings and what the core derives its
    /// credentials, peer policy, limits and relay addresses from. Every other value is the
    /// configuration's default.
    struct Options {
        /// `CoreSettings.defaults` with the fixture's relay port range.
        var settings: CoreSettings = {
            var settings = CoreSettings.defaults
            settings.minPort = CoreFixture.minPort
            settings.maxPort = CoreFixture.maxPort
            return settings
        }()
        var realm = CoreFixture.realm
        /// Static users (`user=`) by name, with their passwords. ASCII only: the OpaqueString
        /// preparation (RFC 8265 §4.2) leaves those as they are, so the fixture need not do it.
        var users = [CoreFixture.staticUser: CoreFixture.staticPassword]
        /// The REST secrets (`use-auth-secret`, `static-auth-secret`); empty: no REST usernames.
        var restSecrets = [CoreFixture.secret]
        /// Each relay address's bound form and its advertised (`external-ip`) one.
        var relayAddresses = [RelayAddress.unmapped(CoreFixture.relayIP)]
        /// The listening addresses: the peer policy denies their service ports.
        var listeningIPs = [CoreFixture.server.ip]
        /// The listening, TLS and API ports (the configuration's 3478, 5349, 8080).
        var servicePorts: Set<UInt16> = [CoreFixture.server.port, 5349, 8080]
        /// Peer policy: `denied-peer-ip`, `allowed-peer-ip`, `allow-loopback-peers`.
        var deniedPeerIPs: [IPRange] = []
        var allowedPeerIPs: [IPRange] = []
        var allowLoopbackPeers = false
        /// `user-quota`, `total-quota` (0: unlimited).
        var userQuota = 0
        var totalQuota = 0
        /// `bps-capacity` (0: unlimited).
        var bpsCapacity = 0
        /// Per-source limits (docs/rate-limits.md) at the configuration's defaults.
        var unauthRateLimit = 20
        var unauthRateBurst = 1000
        var authFailureRateLimit = 5
        var allocateRateLimit = 0
        /// `stale-nonce`: seconds a nonce stays fresh.
        var nonceLifetime: Int64 = 600
        /// Tenants besides the default one (docs/tenants.md), in order (indexes 1, 2, …).
        var tenants: [TenantOption] = []
        /// Whether the default tenant allows `cross-tenant-relay`.
        var defaultCrossTenantRelay = false
    }

    /// One tenant of `Options.tenants`: REST secrets only, reached by credential, or by a
    /// listener address or ORIGIN; its own limits for the ledger.
    struct TenantOption {
        var name: String
        var secret: String
        var realm: String
        var listener: IPAddress? = nil
        var origin: String? = nil
        var crossTenantRelay = false
        var maxBPS = 0
        var limits = TenantLimits()
        /// Its `denied-peer-ip`, added to the node's.
        var deniedPeerIPs: [IPRange] = []
    }

    /// The tenant table `options` describes, built as `Relay` builds it from tenant files.
    static func tenants(_ options: Options, interfaceAddresses: [IPAddress] = []) -> TenantTable {
        var byListener: [IPAddress: Int] = [:]
        var byOrigin: [String: Int] = [:]
        let tenants = options.tenants.enumerated().map { i, t in
            if let listener = t.listener { byListener[listener] = i + 1 }
            if let origin = t.origin { byOrigin[origin] = i + 1 }
            return Tenant(
                name: t.name,
                credentials: CredentialStore(realm: t.realm, users: [:], restSecrets: [t.secret], separator: ":"),
                sharedCredentials: CredentialStore(realm: options.realm, users: [:], restSecrets: [t.secret], separator: ":"),
                policy: policy(
                    CoreFixture.options {
                        $0 = options
                        $0.deniedPeerIPs += t.deniedPeerIPs
                    }, interfaceAddresses: interfaceAddresses), maxBPS: t.maxBPS,
                crossTenantRelay: t.crossTenantRelay)
        }
        return TenantTable(
            slots: tenants, order: Array(tenants.indices.map { $0 + 1 }), byListener: byListener, byOrigin: byOrigin,
            byServerName: [:], defaultCrossTenantRelay: options.defaultCrossTenantRelay)
    }

    /// The fixture's options, changed by `adjust`.
    static func options(_ adjust: (inout Options) -> Void = { _ in }) -> Options {
        var options = Options()
        adjust(&options)
        return options
    }

    /// The context of loop thread `threadIndex` of `threadCount` for `options`, as `Relay`'s
    /// `CoreContext(configuration:...)` builds it; the shared trackers are passed in so every
    /// loop thread counts against the same ones.
    /// The node's admission limits of `options` (`user-quota`, `total-quota`, `bps-capacity`).
    static func limits(_ options: Options) -> LocalAdmissionLedger.Limits {
        .init(
            userQuota: options.userQuota, totalQuota: options.totalQuota, bpsCapacity: options.bpsCapacity,
            tenants: Dictionary(uniqueKeysWithValues: options.tenants.map { ($0.name, $0.limits) }))
    }

    static func context(
        _ options: Options = options(), nonceKey: [UInt8] = Array(0..<32), ledger: any AdmissionLedger,
        reservationTable: ReservationTable = ReservationTable(),
        directory: RelayedAddressDirectory = RelayedAddressDirectory(), interfaceAddresses: [IPAddress] = [],
        threadIndex: Int = 0, threadCount: Int = 1,
        mobility: MobilityTickets = MobilityTickets(), ports: RelayPortPool? = nil
    ) -> CoreContext {
        var context = CoreContext(
            settings: options.settings, credentials: credentials(options),
            nonces: NonceGenerator(key: nonceKey, lifetime: options.nonceLifetime),
            policy: policy(options, interfaceAddresses: interfaceAddresses), relayAddresses: options.relayAddresses,
            ledger: ledger,
            sourceLimits: SourceLimits(
                challenges: SourceRateLimiter(perSecond: options.unauthRateLimit, burst: options.unauthRateBurst),
                failures: SourceRateLimiter(perSecond: options.authFailureRateLimit),
                allocations: SourceRateLimiter(perSecond: options.allocateRateLimit)),
            reservationTable: reservationTable, directory: directory, threadIndex: threadIndex,
            threadCount: threadCount, mobility: mobility, ports: ports)
        context.tenants = tenants(options, interfaceAddresses: interfaceAddresses)
        return context
    }

    /// The static users' MD5 and SHA-256 long-term keys (RFC 8489 §9.2.2) and the REST secrets.
    static func credentials(_ options: Options) -> CredentialStore {
        var md5: [String: [UInt8]] = [:]
        var sha256: [String: [UInt8]] = [:]
        for (name, password) in options.users {
            precondition(password.utf8.allSatisfy { $0 < 0x80 }, "fixture passwords are ASCII")
            md5[name] = KeyDerivation.longTermKeyMD5(username: name, realm: options.realm, password: password)
            sha256[name] = KeyDerivation.longTermKeySHA256(
                username: Array(name.utf8), realm: Array(options.realm.utf8), password: Array(password.utf8))
        }
        return CredentialStore(
            realm: options.realm, users: md5, sha256Users: sha256, restSecrets: options.restSecrets, separator: ":")
    }

    /// The peer policy: the listening and relay addresses (both forms) and the host's
    /// interface addresses are the server's own; the relay addresses' relay ports stay
    /// reachable while an allocation holds them.
    static func policy(_ options: Options, interfaceAddresses: [IPAddress] = []) -> PeerPolicy {
        let relays = Set(options.relayAddresses.flatMap { [$0.bound, $0.advertised] })
        return PeerPolicy(
            denied: options.deniedPeerIPs, allowed: options.allowedPeerIPs, allowLoopback: options.allowLoopbackPeers,
            ownAddresses: relays.union(options.listeningIPs + interfaceAddresses), servicePorts: options.servicePorts,
            relayAddresses: relays, relayPorts: options.settings.relayPorts)
    }

    /// The node-wide relay port pool of `options`, for several loops of one node.
    static func portPool(_ options: Options = options()) -> RelayPortPool {
        RelayPortPool(range: options.settings.relayPorts, addresses: options.relayAddresses.map(\.bound))
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

extension RelayAddress {
    /// A relay address without `external-ip`: advertised as it is bound.
    static func unmapped(_ ip: IPAddress) -> RelayAddress { RelayAddress(bound: ip, advertised: ip) }
}

extension Route {
    var isClient: Bool {
        if case .client = self { return true }
        return false
    }
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
    let options: CoreFixture.Options

    init(
        options: CoreFixture.Options = CoreFixture.options(), now: Int64 = CoreFixture.start,
        interfaceAddresses: [IPAddress] = [], loop: LoopPlacement? = nil, seed: UInt64? = nil,
        ledger: ((LocalAdmissionLedger) -> any AdmissionLedger)? = nil
    ) {
        self.options = options
        self.now = now
        admission = loop?.admission ?? LocalAdmissionLedger(limits: CoreFixture.limits(options))
        let context = CoreFixture.context(
            options, ledger: ledger?(admission) ?? admission,
            reservationTable: loop?.reservations ?? ReservationTable(), directory: loop?.directory ?? RelayedAddressDirectory(), interfaceAddresses: interfaceAddresses,
            threadIndex: loop?.index ?? 0, threadCount: loop?.count ?? 1,
            mobility: loop?.mobility ?? MobilityTickets(), ports: loop?.ports)
        core = RelayCore(context: context, logger: CoreFixture.quietLogger, seed: seed)
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

    func origin(
        _ client: TransportAddress, transport: TransportProtocol = .udp, server: TransportAddress = CoreFixture.server
    ) -> ClientOrigin {
        ClientOrigin(fiveTuple: FiveTuple(client: client, server: server, transport: transport), socket: listenerSocket)
    }

    /// Hands `bytes` to the core as one datagram (or stream frame) from `client`; returns what it queued.
    @discardableResult
    func receive(
        _ bytes: [UInt8], from client: TransportAddress, transport: TransportProtocol = .udp,
        server: TransportAddress = CoreFixture.server
    ) -> [SentPacket] {
        let origin = origin(client, transport: transport, server: server)
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
        var packets = drainOnce()
        // The relay sockets the flush opened are answered after it, as the loop does.
        while !heldOpens.isEmpty && !holdRelayOpens {
            let opens = heldOpens
            heldOpens.removeAll()
            for (open, opening) in opens { core.relaySocketOpened(open, opening, now: now) }
            packets += drainOnce()
        }
        return packets
    }

    /// When set, the relay sockets the core asks for are opened but their outcome is held back
    /// (in `heldOpens`) until `answerRelayOpens`: for what happens while an Allocate waits.
    var holdRelayOpens = false
    /// Opened relay sockets whose outcome the core has not been given yet.
    var heldOpens: [(RelaySocketOpen, RelaySocketOpening)] = []
    /// Every `openRelaySocket` command, in order.
    var relayOpenRequests: [RelaySocketOpen] = []

    /// Gives the core the held outcomes; returns what it queued.
    @discardableResult
    func answerRelayOpens() -> [SentPacket] {
        holdRelayOpens = false
        return drainOutbox()
    }

    private func drainOnce() -> [SentPacket] {
        core.outbox.forEachInOrder(
            packet: { stream.append($0.route.isClient ? "packet to client" : "packet to peer") },
            command: { stream.append(Self.name(of: $0)) })
        let packets = core.outbox.packets.map {
            SentPacket(route: $0.route, bytes: Array($0.bytes), dontFragment: $0.dontFragment)
        }
        for command in core.outbox.commands {
            switch command {
            case .openRelaySocket(let request):
                relayOpenRequests.append(request)
                heldOpens.append((request, sockets.open(request)))
            case .closeRelaySocket(let socket):
                sockets.closeRelaySocket(socket)
            case .setDontFragment(let socket):
                dontFragment.append(socket)
            case .watchRelaySocket(let socket, let drain):
                watched.append((socket, drain))
            case .deliverToStream(let delivery):
                let sink = delivery.sink as? RecordingStreamSink
                if sink?.take(delivery.bytes) != true { core.streamDeliveryRefused(delivery, now: now) }
            case .installChannel(let route):
                channelCommands.append(.install(route))
            case .removeChannel(let route):
                channelCommands.append(.remove(route))
            case .session(let event):
                sessionEvents.append(event)
                switch event {
                case .started: started += 1
                case .ended(let summary): sessions.append(summary)
                case .refreshed, .moved: break
                }
            case .forwardRequest(let request):
                forwarded.append(request)
            case .steerClient(_, let from, let to):
                steering.append(Steering(from: from, to: to))
            case .connectPeer(let request):
                connects.append(request)
            case .bindDataConnection(let bind):
                dataBinds.append(bind)
            case .lookUpUser(let lookup):
                userLookups.append(lookup)
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
    /// The relay sockets the core asked to read (`CoreCommand.watchRelaySocket`), in order.
    var watched: [(socket: RelaySocket, drain: Bool)] = []

    /// A channel route command, as a data plane outside the core would receive it.
    enum ChannelCommand: Equatable {
        case install(ChannelRoute)
        case remove(ChannelRoute)
    }

    /// Every channel route command the core emitted, in order.
    var channelCommands: [ChannelCommand] = []
    /// Allocations whose start the core announced.
    var started = 0
    /// The core's output as one ordered stream, as the loop executes it: "packet to client",
    /// "packet to peer", or a command's name (`name(of:)`).
    var stream: [String] = []

    /// A command's case name, for `stream`.
    static func name(of command: CoreCommand) -> String {
        switch command {
        case .openRelaySocket: "openRelaySocket"
        case .closeRelaySocket: "closeRelaySocket"
        case .setDontFragment: "setDontFragment"
        case .watchRelaySocket: "watchRelaySocket"
        case .deliverToStream: "deliverToStream"
        case .installChannel: "installChannel"
        case .removeChannel: "removeChannel"
        case .session(.started): "session started"
        case .session(.refreshed): "session refreshed"
        case .session(.moved): "session moved"
        case .session(.ended): "session ended"
        case .forwardRequest: "forwardRequest"
        case .steerClient: "steerClient"
        case .connectPeer: "connectPeer"
        case .bindDataConnection: "bindDataConnection"
        case .lookUpUser: "lookUpUser"
        }
    }

    /// Users the core asked to look up in the user database, in order.
    var userLookups: [UserLookup] = []

    /// Every session event the core emitted, in order.
    var sessionEvents: [SessionEvent] = []
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
        transport: TransportProtocol = .udp, server: TransportAddress = CoreFixture.server
    ) -> TurnTestClient {
        let username = CoreFixture.restUsername(user, validFor: validFor)
        return self.client(
            at: client, username: username, password: CoreFixture.restPassword(username, secret: secret),
            transport: transport, server: server)
    }

    /// A client at `client` with explicit long-term credentials.
    func client(
        at client: TransportAddress, username: String, password: String, transport: TransportProtocol = .udp,
        server: TransportAddress = CoreFixture.server
    ) -> TurnTestClient {
        TurnTestClient(username: username, password: password) { [self] bytes in
            try self.receive(bytes, from: client, transport: transport, server: server).first { $0.client == client }.map {
                try ReceivedStun($0.bytes)
            }
        }
    }
}
