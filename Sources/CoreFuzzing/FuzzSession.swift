import Logging
import RelayCore
import StunCodec

// Used by core-fuzz (FuzzCore/) and by the corpus replay in CoreFuzzRegressionTests.

/// One fuzz input driving a fresh `RelayCore` (RFC 8656 state machine) with fake relay sockets
/// and a manual clock. The first byte holds flags (bit 0: authenticated prefix for clients 0
/// and 2, bit 1: an IPv6 allocation for client 3); then each operation is an opcode byte:
///
/// - `0`, `1`: raw client packet: tuple byte, 16-bit length, bytes
/// - `2`: signed request (valid MESSAGE-INTEGRITY, RFC 8489 §9.2): tuple, method, peer,
///   channel, lifetime (16 bits), then raw extra attributes (16-bit length, bytes)
/// - `3`: peer datagram: socket byte, peer byte, 16-bit length, bytes
/// - `4`: advance the clock (byte: seconds, or minutes above 199); `5`: sweep
/// - `6`: the tuple's TCP/TLS connection closes; `7`: ChannelData: tuple, channel 0x4000+(byte & 3),
///   16-bit length, payload (padded on streams)
///
/// After every operation `checkInvariants` judges the outbox and the core's bookkeeping.
public final class FuzzSession {
    static let realm = "fuzz.test"
    static let secret = "core-fuzz-secret"
    static let start: Int64 = 1_700_000_000
    static let server = TransportAddress("192.0.2.100:3478")!
    /// The UDP listeners: two IPs and two ports, so NAT behaviour discovery (RFC 5780) has an
    /// alternate address; the first is `server`, on the socket the tuples use.
    static let listeners: [(TransportAddress, ClientSocket)] = [
        ("192.0.2.100:3478", 3), ("192.0.2.100:3479", 4), ("192.0.2.101:3478", 5), ("192.0.2.101:3479", 6),
    ].map { (TransportAddress($0.0)!, ClientSocket(descriptor: $0.1)) }
    static let tuples: [(TransportAddress, TransportProtocol)] = [
        (TransportAddress("198.51.100.1:40001")!, .udp), (TransportAddress("198.51.100.2:40002")!, .udp),
        (TransportAddress("198.51.100.3:40003")!, .tcp), (TransportAddress("[2001:db8::7]:40004")!, .tls),
    ]
    static let peers: [TransportAddress] = [
        "1.2.3.4:5000", "5.6.7.8:6000", "10.0.0.5:50001", "10.1.2.3:53", "192.0.2.100:3478", "[2606:4700::1]:443",
        "[::ffff:127.0.0.1]:80", "[2001:db8::5]:50001",
    ].map { TransportAddress($0)! }
    static let totalPorts = 2 * 8

    let sockets = FuzzSockets()
    /// The outbox's commands `answerRelayOpens` has gone through.
    var opensAnswered = 0
    let ledger = FuzzClusterLedger(local: LocalAdmissionLedger())
    var quota: LocalAdmissionLedger { ledger.local }
    let core: RelayCore
    /// The core's counters (after `run`: what the input made it do).
    public var counters: CoreCounters { core.counters }
    var now = FuzzSession.start
    var nonces: [Int: String] = [:]
    /// The last MOBILITY-TICKET the core handed out, and the tuple whose credentials own it, for
    /// a Refresh to move with.
    var lastTicket: (bytes: [UInt8], owner: Int)? = nil
    var serial: UInt64 = 0
    private(set) var failures: [String] = []
    /// Connects of TCP allocations the core asked for (RFC 6062), and the connection ids it
    /// handed out, for ConnectionBinds to name.
    var pendingConnects: [PeerConnect] = []
    var offeredConnections: [PeerConnectionID] = []
    /// The tuple whose packet the core is handling: the only one a Binding answer may be sent
    /// to from another listener or to another port (RFC 5780).
    var asking: Int? = nil

    public init() {
        // What `relayd` builds from a configuration with `use-auth-secret`, `static-auth-secret`,
        // `listening-ip` 192.0.2.100 and 192.0.2.101, `listening-port` 3478, `alt-listening-port`
        // 3479, `rfc5780`, `rfc3489-compatibility`, `relay-ip` 10.0.0.5 and 2001:db8::5,
        // `min-port` 50000 and `max-port` 50007, everything else at its default; made here from
        // the core's own types.
        var settings = CoreSettings.defaults
        settings.minPort = 50000
        settings.maxPort = 50007
        settings.rfc5780 = true
        settings.rfc3489Compatibility = true
        let listeningIPs = [Self.server.ip, IPAddress("192.0.2.101")!]
        let relayIPs = [IPAddress("10.0.0.5")!, IPAddress("2001:db8::5")!]
        // The configuration's listening, TLS, API and alternate ports: the peer policy refuses
        // them on the server's own addresses.
        let servicePorts: Set<UInt16> = [Self.server.port, 5349, 8080, Self.server.port + 1]
        let policy = PeerPolicy(
            denied: [], allowed: [], allowLoopback: false, ownAddresses: Set(listeningIPs + relayIPs),
            servicePorts: servicePorts, relayAddresses: Set(relayIPs), relayPorts: settings.relayPorts)
        // The configuration's default per-source limits (docs/rate-limits.md).
        let sourceLimits = SourceLimits(
            challenges: SourceRateLimiter(perSecond: 20, burst: 1000), failures: SourceRateLimiter(perSecond: 5),
            allocations: SourceRateLimiter(perSecond: 0))
        // The pool starts at 50001: the first allocation of each family holds the relayed
        // address among `peers` (10.0.0.5:50001, [2001:db8::5]:50001), which the peer policy
        // lets a permission or channel reach only while an allocation holds it.
        let ports = RelayPortPool(range: settings.relayPorts, addresses: relayIPs, start: 1)
        let context = CoreContext(
            settings: settings,
            credentials: CredentialStore(realm: Self.realm, users: [:], restSecrets: [Self.secret], separator: ":"),
            nonces: NonceGenerator(key: Array(0..<32), lifetime: 600), policy: policy,
            relayAddresses: relayIPs.map { RelayAddress(bound: $0, advertised: $0) }, ledger: ledger,
            sourceLimits: sourceLimits, ports: ports)
        core = RelayCore(context: context, logger: Logger(label: "core-fuzz") { _ in SwiftLogNoOpLogHandler() })
        for (address, socket) in Self.listeners { core.addUDPListener(address, socket: socket) }
    }

    /// Runs `input` and ends every allocation; returns the broken invariants (empty when none).
    public func run(_ input: UnsafeRawBufferPointer) -> [String] {
        var r = FuzzReader(input)
        let flags = r.byte()
        if flags & 1 != 0 {
            for t in [0, 2] { prefix(tuple: t, family: .ipv4) }
        }
        if flags & 2 != 0 { prefix(tuple: 3, family: .ipv6) }
        // Cluster mode (docs/cluster.md): what a simulated Redis counts for this node must
        // always equal the node's own count.
        if flags & 4 != 0 { ledger.joinCluster() }
        while !r.atEnd {
            let op = r.byte()
            switch op & 7 {
            case 0, 1: let t = tuple(r.byte()); client(t, r.chunk())
            case 2:
                signed(
                    tuple: tuple(r.byte()), method: r.byte(), peer: r.byte(), channel: r.byte(), lifetime: r.u16(),
                    extra: r.chunk())
            case 3 where op & 8 != 0: peerICMP(socket: r.byte(), peer: r.byte(), type: r.byte(), code: r.byte())
            case 3: peerPacket(socket: r.byte(), peer: r.byte(), r.chunk())
            case 4: let k = Int64(r.byte()); now += k < 200 ? k : (k - 199) * 60
            case 5 where op & 8 != 0 && ledger.clustered: answerAdmission(r.byte())
            case 5 where op & 8 != 0: finishConnect(r.byte(), peer: r.byte())
            case 5: core.sweep(now: now)
            case 6: core.connectionClosed(origin(tuple(r.byte())), now: now)
            default:
                let t = tuple(r.byte())
                let channel = r.byte() & 3
                let payload = r.chunk()
                let padded = Self.tuples[t].1.isStream
                var frame: [UInt8] = [0x40, channel, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
                while padded && frame.count % 4 != 0 { frame.append(0) }
                client(t, frame)
            }
            checkInvariants()
        }
        while ledger.pendingCount > 0 { answerAdmission(0) }
        core.shutdown(now: now)
        core.sweep(now: now + 3600)
        checkCommands([])
        core.outbox.reset()
        opensAnswered = 0
        if ledger.clustered {
            let redisCount = ledger.syncRedis()
            require(redisCount == 0, "Redis would still count \(redisCount) allocations of this node after shutdown")
        }
        require(sockets.bound.isEmpty, "\(sockets.bound.count) relay sockets open after shutdown")
        require(core.tables.tcpConnections.count == 0, "peer connections listed after shutdown")
        require(sockets.parked.isEmpty, "\(sockets.parked.count) peer sockets parked after shutdown")
        require(core.relayPortsInUse == 0, "\(core.relayPortsInUse) relay ports in use after shutdown and sweep")
        require(quota.total == 0, "quota still counts \(quota.total) allocations after shutdown")
        return failures
    }

    func tuple(_ b: UInt8) -> Int { Int(b) % Self.tuples.count }

    /// Ends the oldest connect as the I/O layer would (connected or not, by `b`), or with none
    /// waiting, has a peer connect in to a TCP allocation's relayed address; a peer socket the
    /// core keeps is parked under a made-up descriptor.
    func finishConnect(_ b: UInt8, peer: UInt8) {
        let fd = PeerSocket(descriptor: Int32(1000 + offeredConnections.count))
        let id: PeerConnectionID?
        if !pendingConnects.isEmpty {
            let request = pendingConnects.removeFirst()
            let kept = core.peerConnectFinished(request.id, relaySocket: request.relaySocket, connected: b & 1 == 0, now: now)
            id = kept ? request.id : nil
        } else if let socket = sockets.tcp.sorted().first {
            id = core.peerConnectionArrived(on: socket, from: Self.peers[Int(peer) % Self.peers.count], now: now)
        } else {
            id = nil
        }
        guard let id, core.tables.tcpConnections.park(id, peerSocket: fd, deadline: now + 30) else { return }
        sockets.parked.insert(fd)
        offeredConnections.append(id)
        checkCommands(Array(core.allocations))
        core.outbox.reset()
        opensAnswered = 0
    }

    /// Answers the oldest waiting Allocate as Redis would: granted (counted), refused, or
    /// decided locally; the core resumes it.
    func answerAdmission(_ b: UInt8) {
        guard let (ticket, decision) = ledger.answerOldest(b) else { return }
        let t = Self.tuples.indices.first { origin($0).fiveTuple == core.pendingAllocate(ticket) } ?? 0
        core.resumeAllocate(ticket, decision: decision, now: now)
        answerRelayOpens()
        learnNonces(for: t)
        checkInvariants()
    }

    /// An RFC 3489 Binding response: type 0x0101, a length that matches, no magic cookie.
    static func isClassicBindingResponse(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= 20 else { return false }
        let type = bytes.loadUnaligned(fromByteOffset: 0, as: UInt16.self).bigEndian
        let length = Int(bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self).bigEndian)
        return type == 0x0101 && length + 20 == bytes.count && length & 3 == 0
    }

    func origin(_ t: Int) -> ClientOrigin {
        ClientOrigin(
            fiveTuple: FiveTuple(client: Self.tuples[t].0, server: Self.server, transport: Self.tuples[t].1),
            socket: ClientSocket(descriptor: 3))
    }

    /// Executes the `openRelaySocket` commands queued since the last call and answers each, as
    /// the loop does after its flush, until the core asks for no more; they stay in the outbox,
    /// where `checkCommands` judges them.
    func answerRelayOpens() {
        while opensAnswered < core.outbox.commands.count {
            let command = core.outbox.commands[opensAnswered]
            opensAnswered += 1
            guard case .openRelaySocket(let request) = command else { continue }
            core.relaySocketOpened(request, sockets.open(request), now: now)
        }
    }

    /// One client packet in a buffer of exactly its size, so AddressSanitizer sees an over-read.
    func client(_ t: Int, _ bytes: [UInt8]) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 8)
        defer { buffer.deallocate() }
        buffer.copyBytes(from: bytes)
        asking = t
        core.handleClientPacket(UnsafeRawBufferPointer(buffer), from: origin(t), now: now)
        answerRelayOpens()
        learnNonces(for: t)
    }

    func peerPacket(socket: UInt8, peer: UInt8, _ payload: [UInt8]) {
        let open = core.allocations.map(\.relaySocket).sorted()
        let fd = open.isEmpty || socket == 0xFF ? RelaySocket(descriptor: 9999) : open[Int(socket) % open.count]
        let candidates = Self.peers + core.allocations.map(\.relayedAddress)
        let head = RelayCore.peerHeadroom
        let buffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: head + payload.count + RelayCore.peerTailroom, alignment: 8)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0xA5)
        UnsafeMutableRawBufferPointer(rebasing: buffer[head...]).copyBytes(from: payload)
        core.handlePeerPacket(
            relaySocket: fd, from: candidates[Int(peer) % candidates.count], buffer: buffer,
            payload: head..<head + payload.count, now: now)
        checkInvariants()
    }

    /// An ICMP error for a datagram a relay socket sent (RFC 8656 §11.5), for a peer (or one of
    /// relayd's own relayed addresses) of the fuzzer's choosing: answered at most with a Data
    /// indication to the allocation's own client, which `checkInvariants` parses.
    func peerICMP(socket: UInt8, peer: UInt8, type: UInt8, code: UInt8) {
        let open = core.allocations.map(\.relaySocket).sorted()
        let fd = open.isEmpty || socket == 0xFF ? RelaySocket(descriptor: 9999) : open[Int(socket) % open.count]
        let candidates = Self.peers + core.allocations.map(\.relayedAddress)
        let owner = core.allocations.first { $0.relaySocket == fd }?.origin
        core.handlePeerICMP(
            relaySocket: fd, peer: candidates[Int(peer) % candidates.count],
            icmp: ICMP(type: type, code: code, errorData: UInt32(type) << 8 | UInt32(code)), now: now)
        for packet in core.outbox.packets {
            guard case .client(let o) = packet.route else {
                require(false, "an ICMP error made the core send to a peer")
                continue
            }
            require(o == owner, "an ICMP error's indication went to another allocation's client")
        }
        checkInvariants()
    }

    /// The long-term key of tuple `t`'s REST username (RFC 8489 §9.2.2, coturn use-auth-secret).
    func credentials(_ t: Int) -> (username: String, key: [UInt8]) {
        let username = "\(Self.start + 3_650 * 86_400):fuzz\(t)"
        let password = KeyDerivation.restPassword(secret: Self.secret, username: username)
        return (username, KeyDerivation.longTermKeyMD5(username: username, realm: Self.realm, password: password))
    }

    /// A request signed with the tuple's credentials and last nonce: methods Allocate, Refresh,
    /// CreatePermission, ChannelBind or Binding, with fuzzed fields and extra attributes before
    /// MESSAGE-INTEGRITY.
    func signed(tuple t: Int, method: UInt8, peer: UInt8, channel: UInt8, lifetime: UInt16, extra: [UInt8]) {
        let methods: [Method] = [.allocate, .refresh, .createPermission, .channelBind, .binding, .connect, .connectionBind]
        let m = methods[Int(method & 7) % methods.count]
        // A Refresh with the last ticket is signed as the ticket's owner: a move can succeed.
        let ticket = m == .refresh && lifetime & 0x4000 != 0 ? lastTicket : nil
        let (username, key) = credentials(ticket?.owner ?? t)
        serial += 1
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count: Int? = buffer.withUnsafeMutableBytes { raw in
            do throws(StunEncodeError) {
                var w = try StunMessageWriter(
                    into: raw, type: MessageType(method: m, messageClass: .request),
                    transactionID: TransactionID(high: 0xF022, low: serial))
                let target = Self.peers[Int(peer) % Self.peers.count]
                switch m {
                case .allocate:
                    try w.append(
                        RequestedTransport(
                            protocolNumber: method & 0x80 != 0 ? UInt8(truncatingIfNeeded: lifetime) : 17))
                    if method & 0x40 != 0 { try w.append(EvenPort(reservePair: method & 0x20 != 0)) }
                    if method & 0x10 != 0 { try w.append(RequestedAddressFamily(family: .ipv6)) }
                    if method & 0x08 != 0 { try w.append(AdditionalAddressFamily(family: .ipv6)) }
                    if lifetime & 0x8000 != 0 { try w.append(MobilityTicket(bytes: [])) }
                    try w.append(Lifetime(seconds: UInt32(lifetime) * 16))
                case .refresh:
                    try w.append(Lifetime(seconds: method & 0x80 != 0 ? 0 : UInt32(lifetime)))
                    if method & 0x08 != 0 {
                        try w.append(RequestedAddressFamily(family: lifetime & 1 == 0 ? .ipv4 : .ipv6))
                    }
                    if let ticket { try w.append(MobilityTicket(bytes: ticket.bytes)) }
                case .createPermission:
                    try w.append(XORPeerAddress(address: target))
                    if method & 0x80 != 0 {
                        try w.append(XORPeerAddress(address: Self.peers[Int(channel) % Self.peers.count]))
                    }
                case .channelBind:
                    try w.append(ChannelNumber(value: 0x4000 &+ UInt16(channel) &* (method & 0x80 != 0 ? 0x101 : 1)))
                    try w.append(XORPeerAddress(address: target))
                case .connect:
                    try w.append(XORPeerAddress(address: target))
                case .connectionBind:
                    // The id of a connection the core offered, or a made-up one.
                    try w.append(ConnectionID(value: offeredConnections.isEmpty || method & 0x80 != 0
                        ? UInt32(lifetime) : offeredConnections[Int(channel) % offeredConnections.count].value))
                default: break
                }
                extra.withUnsafeBytes { value in
                    if !value.isEmpty {
                        try? w.append(
                            AttributeType(rawValue: UInt16(extra[0]) << 8 | UInt16(channel)),
                            value: UnsafeRawBufferPointer(rebasing: value[1...]))
                    }
                }
                try w.append(Username(value: username))
                try w.append(Realm(value: Self.realm))
                try w.append(Nonce(value: nonces[t] ?? "none"))
                try w.appendMessageIntegrity(key: key)
                if method & 0x08 != 0 { try w.appendFingerprint() }
                return w.count
            } catch {
                return nil
            }
        }
        if let count { client(t, Array(buffer[0..<count])) }
    }

    /// The 401 dance, then CreatePermission for peers 0-2 and ChannelBind 0x4000 and 0x4001:
    /// deep state for the data path; it must succeed.
    func prefix(tuple t: Int, family: IPAddress.Family) {
        signed(tuple: t, method: family == .ipv6 ? 0x10 : 0, peer: 0, channel: 0, lifetime: 0, extra: [])
        let steps: [(method: UInt8, peer: UInt8, channel: UInt8)] =
            family == .ipv6
            ? [(0x10, 0, 0), (2, 5, 0), (3, 5, 0), (3, 7, 1)] : [(0, 0, 0), (0x82, 1, 2), (3, 0, 0), (3, 2, 1)]
        for step in steps {
            signed(tuple: t, method: step.method, peer: step.peer, channel: step.channel, lifetime: 0, extra: [])
        }
        require(
            core.allocation(for: origin(t).fiveTuple)?.channels.count == 2,
            "prefix for tuple \(t) did not reach two channels")
        checkInvariants()
    }

    /// Remembers NONCE from the answers queued for tuple `t` (401, 438), and the last
    /// MOBILITY-TICKET handed to any tuple.
    func learnNonces(for t: Int) {
        for packet in core.outbox.packets {
            guard case .client(let o) = packet.route, o == origin(t),
                let message = try? StunMessage(parsing: packet.bytes), let nonce = try? message.decode(Nonce.self)
            else { continue }
            nonces[t] = nonce.value
        }
        for packet in core.outbox.packets {
            guard case .client(let o) = packet.route, let message = try? StunMessage(parsing: packet.bytes),
                let ticket = try? message.decode(MobilityTicket.self),
                let owner = core.allocations.first(where: { $0.origin.fiveTuple == o.fiveTuple })
                    .flatMap({ a in Self.tuples.indices.first { credentials($0).username == a.username } })
            else { continue }
            lastTicket = (ticket.bytes, owner)
        }
    }

    /// What must hold after every operation; then the outbox is reset as the I/O layer would.
    func checkInvariants() {
        answerRelayOpens()
        let allocations = Array(core.allocations)
        if ledger.clustered {
            let redisCount = ledger.syncRedis()
            require(redisCount == quota.total, "Redis would count \(redisCount) allocations, the node \(quota.total)")
        }
        for packet in core.outbox.packets {
            switch packet.route {
            case .client(let o):
                // To a tuple as it came in, or (NAT behaviour discovery, RFC 5780) a Binding
                // response from another listener of this loop or to another port: always to the IP
                // of a tuple, over UDP, never to a third party.
                let exact = Self.tuples.indices.contains { origin($0) == o }
                let discovery =
                    !exact && o.fiveTuple.transport == .udp
                    && Self.listeners.contains { $0 == (o.fiveTuple.server, o.socket) }
                    && asking.map { Self.tuples[$0].0.ip == o.fiveTuple.client.ip && Self.tuples[$0].1 == .udp } == true
                require(exact || discovery, "packet to unknown client \(o)")
                let first = packet.bytes.first ?? 0xFF
                if first < 4 {
                    let parsed = try? StunMessage(parsing: packet.bytes)
                    let classic = Self.isClassicBindingResponse(packet.bytes)
                    require(
                        (parsed != nil && parsed?.type.messageClass != .request) || classic,
                        "core sent a malformed STUN message or a request")
                    if !exact {
                        require(
                            classic || (parsed?.type.method == .binding && parsed?.type.messageClass == .successResponse),
                            "only a Binding success may leave from another listener or to another port, not to \(o)")
                    }
                } else {
                    require(exact, "ChannelData to \(o), not a client's own 5-tuple")
                    let parsed = try? ChannelDataMessage(parsing: packet.bytes, padded: o.fiveTuple.transport.isStream)
                    require(parsed != nil, "core sent malformed ChannelData to \(o)")
                }
            case .peer(let fd, let peer):
                let owner = allocations.first { $0.relaySocket == fd || $0.additional?.relaySocket == fd }
                require(owner != nil, "packet from relay socket \(fd) that no allocation owns")
                require(
                    owner?.relaySocket(for: peer.ip.family) == fd,
                    "packet to \(peer) from the relay socket of the other family")
                require(owner?.hasPermission(for: peer.ip, now: now) == true, "packet to \(peer) without a permission")
                let verdict = core.context.policy.verdict(for: peer)
                require(
                    verdict == .allowed
                        || (verdict == .relayedAddress
                            && core.tables.ports.isHeld(peer.port, on: peer.ip, by: .udpAllocation)),
                    "packet to \(peer), which the peer policy denies or no live allocation holds")
            }
        }
        checkCommands(allocations)
        core.outbox.reset()
        asking = nil
        require(core.outbox.packets.isEmpty && core.outbox.commands.isEmpty, "outbox not empty after reset")
        opensAnswered = 0
        require(core.relayOpeningCount == 0, "an Allocate still waits for relay sockets no one opens")
        let relayedAddresses = allocations.reduce(0) { $0 + ($1.additional == nil ? 1 : 2) }
        require(
            relayedAddresses == sockets.bound.count,
            "\(relayedAddresses) relayed addresses but \(sockets.bound.count) sockets")
        for a in allocations {
            require(
                sockets.bound[a.relaySocket] == a.relayedAddress,
                "allocation's socket is not bound to \(a.relayedAddress)")
            if let additional = a.additional {
                require(
                    sockets.bound[additional.relaySocket] == additional.relayedAddress,
                    "dual allocation's second socket is not bound to \(additional.relayedAddress)")
                require(
                    additional.relayedAddress.ip.family != a.relayedAddress.ip.family,
                    "dual allocation with two relayed addresses of one family")
            }
        }
        require(core.relayPortsInUse >= relayedAddresses, "fewer ports in use than relayed addresses")
        require(
            core.relayPortsInUse + core.relayPortsFree + core.relayPortsForeign == Self.totalPorts,
            "port accounting lost ports")
        let counted = core.tables.ports.recount()
        require(
            counted.held == core.relayPortsInUse && counted.foreign == core.relayPortsForeign,
            "port counts differ from the holders")
        require(
            quota.total == core.allocationCount, "quota counts \(quota.total) for \(core.allocationCount) allocations")
    }

    /// Executes the outbox's commands as the I/O layer would, judging each: a relay socket is
    /// closed only once and only after its allocation is gone; a channel route is announced only
    /// for a live channel of a live UDP allocation with a live permission, never past any of
    /// their expiries.
    func checkCommands(_ allocations: [Allocation]) {
        for command in core.outbox.commands {
            switch command {
            case .openRelaySocket(let request):
                require(
                    core.context.relayAddresses.contains { $0.bound == request.address.ip }
                        && (core.context.settings.minPort...core.context.settings.maxPort).contains(request.address.port),
                    "opening a relay socket on \(request.address), outside the relay addresses and ports")
            case .closeRelaySocket(let socket):
                require(!allocations.contains { $0.relaySocket == socket }, "closing the socket of a live allocation")
                // As the I/O layer does for a TCP allocation's listener: its peer connections end.
                for entry in core.tables.tcpConnections.removeAll(thread: LoopIndex(0), relaySocket: socket) {
                    if case .ready(let fd) = entry.state { sockets.parked.remove(fd) }
                }
                require(sockets.close(socket), "closing relay socket \(socket) that is not open")
            case .installChannel(let route):
                let owner = allocations.first {
                    $0.relaySocket == route.relaySocket || $0.additional?.relaySocket == route.relaySocket
                }
                require(owner?.origin.fiveTuple.transport == .udp, "channel route for no UDP allocation")
                guard let owner else { continue }
                require(
                    owner.relaySocket(for: route.peer.ip.family) == route.relaySocket,
                    "channel route from the relay socket of the other family")
                let channel = owner.channel(number: route.number, now: now)
                require(channel?.peer == route.peer, "channel route \(route.number) for a channel not bound to \(route.peer)")
                require(owner.hasPermission(for: route.peer.ip, now: now), "channel route without a permission")
                require(route.expiry > now, "channel route already expired")
                require(
                    route.expiry <= owner.expiry(for: route.peer.ip.family) && route.expiry <= (channel?.expiry ?? 0),
                    "channel route outlives its channel or allocation")
            case .watchRelaySocket(let socket, _):
                require(
                    allocations.contains {
                        ($0.relaySocket == socket || $0.additional?.relaySocket == socket) && $0.tcpRelay == nil
                    },
                    "a relay socket watched for no UDP allocation")
            case .setDontFragment(let socket):
                require(
                    allocations.contains { ($0.relaySocket == socket || $0.additional?.relaySocket == socket) && $0.dontFragment },
                    "DONT-FRAGMENT for no such allocation")
            case .forwardRequest:
                require(false, "a request forwarded to another thread with only one thread")
            case .steerClient(let session, _, let to):
                // A Refresh may move an allocation and delete it at once (LIFETIME 0 from the new
                // 5-tuple): then a later command of the batch steers the new 5-tuple away again.
                let endedInBatch = core.outbox.commands.contains { later in
                    if case .steerClient(session, let from, nil) = later { return from == to }
                    return false
                }
                require(
                    to.map { t in allocations.contains { $0.origin.fiveTuple == t && $0.mobile } || endedInBatch } ?? true,
                    "steering a 5-tuple no mobile allocation has")
            case .connectPeer(let request):
                let owner = allocations.first { $0.relaySocket == request.relaySocket }
                require(owner?.tcpRelay != nil, "a connect for no TCP allocation")
                require(owner?.hasPermission(for: request.peer.ip, now: now) == true, "a connect without a permission")
                pendingConnects.append(request)
            case .bindDataConnection(let bind):
                require(bind.origin.fiveTuple.transport.isStream, "a data connection over UDP")
                require(!allocations.contains { $0.origin == bind.origin }, "a data connection that holds an allocation")
                require(sockets.parked.remove(bind.peerSocket) != nil, "binding a peer socket that was not parked")
            case .removeChannel, .deliverToStream, .session, .lookUpUser:
                break
            }
        }
    }

    func require(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition && failures.count < 8 { failures.append(message()) }
    }
}

/// Relay sockets without the network: fake descriptors, one per bound address; port 50003 is
/// always refused, as if another process held it.
final class FuzzSockets {
    private(set) var bound: [RelaySocket: TransportAddress] = [:]
    private var next: Int32 = 100

    /// TCP allocations' listeners among them, and the peer sockets parked for a ConnectionBind.
    private(set) var tcp: Set<RelaySocket> = []
    var parked: Set<PeerSocket> = []

    /// Executes an `openRelaySocket` command.
    func open(_ request: RelaySocketOpen) -> RelaySocketOpening {
        request.tcp ? openTCPRelaySocket(bound: request.address) : openRelaySocket(bound: request.address)
    }

    func openRelaySocket(bound address: TransportAddress) -> RelaySocketOpening {
        if address.port == 50003 || bound.values.contains(address) { return .portInUse }
        next += 1
        bound[RelaySocket(descriptor: next)] = address
        return .opened(RelaySocket(descriptor: next))
    }

    func openTCPRelaySocket(bound address: TransportAddress) -> RelaySocketOpening {
        let opening = openRelaySocket(bound: address)
        if case .opened(let socket) = opening { tcp.insert(socket) }
        return opening
    }

    /// False when `socket` was not open.
    func close(_ socket: RelaySocket) -> Bool {
        tcp.remove(socket)
        return bound.removeValue(forKey: socket) != nil
    }
}

/// Reads operations; past the end every read is zero.
struct FuzzReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var atEnd: Bool { offset >= bytes.count }

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u16() -> UInt16 { UInt16(byte()) << 8 | UInt16(byte()) }

    /// A 16-bit length, then that many bytes (fewer at the end of the input).
    mutating func chunk() -> [UInt8] {
        let n = min(Int(u16()), bytes.count - min(offset, bytes.count))
        defer { offset += n }
        return Array(bytes[offset..<offset + n])
    }
}
