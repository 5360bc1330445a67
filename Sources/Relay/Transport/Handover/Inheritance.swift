import FastPath
import Glibc
import RelayCore
import StunCodec

/// What an heir received from the relayd it replaces in a live upgrade (docs/live-upgrade.md):
/// listening sockets to use instead of binding its own, the UDP allocations with their relay
/// sockets, and the node's keys. Shared by the loops while they start; each descriptor is taken
/// once, and what no loop took is closed by `closeUnused`.
public final class Inheritance: Sendable {
    /// What a handed-over descriptor is: `HandoverSocket`'s kind, loop, session and address.
    struct Key: Hashable {
        var kind: UInt8
        var loop: UInt16
        var session: UInt64
        var address: TransportAddress

        init(_ kind: HandoverSocket.Kind, loop: Int = 0, session: UInt64 = 0, address: TransportAddress) {
            self.init(kind: kind.rawValue, loop: UInt16(loop), session: session, address: address)
        }

        init(kind: UInt8, loop: UInt16, session: UInt64, address: TransportAddress) {
            self.kind = kind
            self.loop = loop
            self.session = session
            self.address = address
        }
    }

    private let sockets: Locked<[Key: Int32]>
    /// The UDP allocations handed over, with their keys (the nonce key, docs/state-journal.md).
    let state: JournalState
    /// What the snapshot held that this process left out, by reason: only lifetimes that ran
    /// out between the snapshot and its reading are expected here; the heir logs any.
    let drops: [JournalDropReason: Int]
    /// The number of loops the running relayd had: its UDP listeners' SO_REUSEPORT groups have
    /// that many members.
    let loops: Int
    /// The channel to the running relayd: `ready` or `failed` goes back on it, and its end of
    /// stream says that relayd has exited.
    let channel: HandoverChannel
    /// The running relayd's pid, from the parent process.
    let predecessor: pid_t
    /// Users the admin API blocked: the blocks go on in this process.
    let blocks: [UserBlocklist.Entry]
    /// The running relayd's counters: `/metrics` goes on from them.
    let counters: CarriedCounters
    /// TCP and TLS clients' connections, by id; each loop takes its own (`streams(loop:)`).
    private let streams: Locked<[UInt64: HandoverStream]>
    /// TCP allocations' RFC 6062 state by session, with the account their pipes charge on
    /// every loop (made here, before any loop starts).
    private let tcpRelays: [UInt64: (snapshot: TCPRelaySnapshot, account: PipeAccount)]
    /// The per-source limiters' buckets that were not full, by limiter.
    let limiters: [HandoverLimiter: [HandoverLimiterEntry]]
    /// RFC 6062 pipes by CONNECTION-ID; each loop takes its own (`pipes(loop:)`).
    private let pipes: Locked<[PeerConnectionID: HandoverPipe]>

    private init(
        sockets: [Key: Int32], state: JournalState, drops: [JournalDropReason: Int], blocks: [UserBlocklist.Entry],
        counters: CarriedCounters,
        streams: [UInt64: HandoverStream], tcpRelays: [UInt64: TCPRelaySnapshot], pipes: [PeerConnectionID: HandoverPipe],
        limiters: [HandoverLimiter: [HandoverLimiterEntry]], loops: Int, channel: HandoverChannel
    ) {
        self.limiters = limiters
        self.sockets = Locked(sockets)
        self.streams = Locked(streams)
        self.pipes = Locked(pipes)
        self.tcpRelays = tcpRelays.compactMapValues { snapshot in
            guard let allocation = state.allocations[snapshot.session] else { return nil }
            let traffic = PipedTraffic(bytesToPeer: snapshot.bytesToPeer, bytesToClient: snapshot.bytesToClient)
            let budget = allocation.bytesPerSecond > 0 ? BandwidthBudget(bytesPerSecond: allocation.bytesPerSecond) : nil
            return (snapshot, PipeAccount(traffic: traffic, budget: budget))
        }
        self.state = state
        self.drops = drops
        self.blocks = blocks
        self.counters = counters
        self.loops = loops
        self.channel = channel
        predecessor = getppid()
    }

    /// The descriptor `HandoverChannel.environmentKey` names, if this process is an heir. The
    /// variable is removed, so this relayd's own heir does not see it.
    static func channelFromEnvironment() -> HandoverChannel? {
        guard let text = getenv(HandoverChannel.environmentKey).map({ String(cString: $0) }) else { return nil }
        unsetenv(HandoverChannel.environmentKey)
        guard let fd = Int32(text), fd >= 0, fcntl(fd, F_GETFD) >= 0 else { return nil }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return HandoverChannel(fd: fd)
    }

    /// Says hello and reads everything the running relayd sends, within `seconds`.
    ///
    /// `clock` is read once the snapshot is whole, never before: the running relayd stamps it
    /// when its loops have paused, after this hello, and a record stamped later than the
    /// reader's second is dropped (docs/state-journal.md), so a second boundary between the
    /// two would lose every allocation.
    static func receive(
        on channel: HandoverChannel, bootID: BootID, clock: () -> Int64, bounds: JournalBounds, seconds: Int64 = 30
    ) throws(HandoverChannel.Failure) -> Inheritance {
        let deadline = HandoverChannel.monotonicMillis() + seconds * 1000
        let predecessor = getenv(HandoverChannel.versionKey).map { String(cString: $0) }
        unsetenv(HandoverChannel.versionKey)
        try channel.send(.hello(version: HandoverMessage.helloVersion(predecessor: predecessor), pid: getpid()))
        var sockets: [Key: Int32] = [:]
        var received = 0
        var snapshot: [UInt8] = []
        var blocks: [UserBlocklist.Entry] = []
        var counterPage: [UInt8] = []
        var streams: [UInt64: HandoverStream] = [:]
        var tcpRelays: [UInt64: TCPRelaySnapshot] = [:]
        var pipes: [PeerConnectionID: HandoverPipe] = [:]
        var limiters: [HandoverLimiter: [HandoverLimiterEntry]] = [:]
        var loops = 0
        func closeAll() { for fd in sockets.values { close(fd) } }
        while true {
            let message: HandoverMessage
            let descriptors: [Int32]
            do { (message, descriptors) = try channel.receive(until: deadline) } catch {
                closeAll()
                throw error
            }
            switch message {
            case .sockets(let list) where list.count == descriptors.count:
                for (socket, fd) in zip(list, descriptors) {
                    let key = Key(
                        kind: socket.kind.rawValue, loop: socket.loop, session: socket.session, address: socket.address)
                    if let earlier = sockets.updateValue(fd, forKey: key) { close(earlier) }
                    if socket.kind == .udpListener { loops = max(loops, Int(socket.loop) + 1) }
                }
                received += list.count
            case .state(let piece) where descriptors.isEmpty:
                snapshot.append(contentsOf: piece)
            case .blocks(let some) where descriptors.isEmpty && blocks.count + some.count <= UserBlocklist.limit:
                blocks += some
            case .counters(let piece)
            where descriptors.isEmpty && counterPage.count + piece.count <= HandoverMessage.maxCounterPage:
                counterPage += piece
            case .stream(let stream) where descriptors.isEmpty && streams[stream.id] == nil:
                streams[stream.id] = stream
            case .tcpRelay(let relay) where descriptors.isEmpty && tcpRelays[relay.session] == nil:
                tcpRelays[relay.session] = relay
            case .pipe(let piece) where descriptors.isEmpty && pipes[piece.id] == nil:
                pipes[piece.id] = piece
            case .pipe(let piece) where descriptors.isEmpty && pipes[piece.id]!.append(piece):
                break
            case .limiters(let limiter, let entries)
            where descriptors.isEmpty && limiters[limiter, default: []].count + entries.count <= Self.maxLimiterEntries:
                limiters[limiter, default: []] += entries
            case .done(let count, let bytes, let blockCount)
            where descriptors.isEmpty && Int(count) == received && Int(bytes) == snapshot.count
                && Int(blockCount) == blocks.count:
                // Every TCP client's socket has its state, and every state its socket.
                let streamSockets = Set(sockets.keys.filter { $0.kind == HandoverSocket.Kind.tcpClient.rawValue }.map(\.session))
                guard streamSockets == Set(streams.keys) else {
                    closeAll()
                    throw HandoverChannel.Failure(description: "TCP connections and their states do not match")
                }
                // Every pipe has both its sockets, and every pipe socket its pipe.
                let pipeIDs = Set(pipes.keys.map { UInt64($0.value) })
                for kind in [HandoverSocket.Kind.pipeClient, .pipePeer] {
                    guard Set(sockets.keys.filter { $0.kind == kind.rawValue }.map(\.session)) == pipeIDs else {
                        closeAll()
                        throw HandoverChannel.Failure(description: "RFC 6062 pipes and their sockets do not match")
                    }
                }
                var bounds = bounds
                bounds.streamClients = true
                do {
                    let recovery = try JournalReader.read(snapshot, bootID: bootID, now: clock(), bounds: bounds)
                    return Inheritance(
                        sockets: sockets, state: recovery.state, drops: recovery.drops, blocks: blocks,
                        counters: CarriedCounters(page: String(decoding: counterPage, as: UTF8.self)),
                        streams: streams, tcpRelays: tcpRelays, pipes: pipes, limiters: limiters, loops: loops,
                        channel: channel)
                } catch {
                    closeAll()
                    throw HandoverChannel.Failure(description: "the state snapshot is unreadable: \(error)")
                }
            default:
                for fd in descriptors { close(fd) }
                closeAll()
                throw HandoverChannel.Failure(description: "unexpected message \(message)")
            }
        }
    }

    /// The TURN listeners handed over (UDP, DTLS, TCP, TLS), before any loop took its own: a
    /// configuration whose listeners differ is refused.
    func turnListeners() -> Set<Key> {
        sockets.withLock { all in Set(all.keys.filter { Self.listenerKinds.contains($0.kind) }) }
    }

    /// The same for the listeners a configuration opens on `loops` loops.
    static func describe(
        udp: [TransportAddress], dtls: [TransportAddress], tcp: [TransportAddress], tls: [TransportAddress], loops: Int
    ) -> Set<Key> {
        var all = Set<Key>()
        for loop in 0..<loops {
            for (kind, addresses) in [
                (HandoverSocket.Kind.udpListener, udp), (.dtlsListener, dtls), (.tcpListener, tcp), (.tlsListener, tls),
            ] {
                for address in addresses { all.insert(Key(kind, loop: loop, address: address)) }
            }
        }
        return all
    }

    private static let listenerKinds: Set<UInt8> = Set(
        [HandoverSocket.Kind.udpListener, .dtlsListener, .tcpListener, .tlsListener].map(\.rawValue))

    /// The descriptor handed over as `key`, taken once.
    private func take(_ key: Key) -> Int32? { sockets.withLock { $0.removeValue(forKey: key) } }

    /// The kernel fast path's maps and links, if the running relayd handed them over; taken once.
    func fastPath() -> KernelFastPath.Handover? {
        sockets.withLock { all in
            var handover = KernelFastPath.Handover()
            for (key, fd) in all {
                switch HandoverSocket.Kind(rawValue: key.kind) {
                case .bpfMap where Int(key.session) < KernelFastPath.sharedMaps.count:
                    handover.maps[KernelFastPath.sharedMaps[Int(key.session)]] = fd
                case .bpfLink: handover.links[Int32(truncatingIfNeeded: key.session)] = fd
                case .bpfXDPLink: handover.xdpLinks[Int32(truncatingIfNeeded: key.session)] = fd
                default: continue
                }
                all[key] = nil
            }
            guard !handover.links.isEmpty else {
                for fd in Array(handover.maps.values) + Array(handover.xdpLinks.values) { close(fd) }
                return nil
            }
            return handover
        }
    }

    /// Loop `loop`'s listening socket of `kind` on `address`, if one was handed over.
    func listener(_ kind: HandoverSocket.Kind, loop: Int = 0, address: TransportAddress) -> Int32? {
        take(Key(kind, loop: loop, address: address))
    }

    /// The connected socket of the moved mobile client of allocation `session` at `client`.
    func steeredSocket(session: UInt64, client: TransportAddress) -> Int32? {
        take(Key(.steered, session: session, address: client))
    }

    /// The relay socket of allocation `session` bound to `address`.
    func relaySocket(session: UInt64, additional: Bool, address: TransportAddress) -> Int32? {
        let kind: HandoverSocket.Kind = additional ? .relayAdditional : .relayMain
        return take(Key(kind, session: session, address: address))
    }

    /// The plain TCP connections loop `loop` served, with their sockets, taken once.
    func streams(loop: Int) -> [(stream: HandoverStream, fd: Int32)] {
        let mine = streams.withLock { all in
            let found = all.values.filter { Int($0.loop) == loop }
            for stream in found { all[stream.id] = nil }
            return found
        }
        return mine.compactMap { stream in
            take(Key(.tcpClient, loop: Int(stream.loop), session: stream.id, address: stream.client)).map { (stream, $0) }
        }
    }

    /// The most buckets a limiter takes from the running relayd (a limiter's table holds 4,096).
    static let maxLimiterEntries = 65536

    /// Puts the running relayd's limiter buckets that were not full into `limits`, before any
    /// loop reads: a source that spent its burst in the old process has not got it back here.
    func restoreLimiters(into limits: SourceLimits, now: Int64) {
        for (limiter, entries) in limiters {
            let target = limiter.of(limits)
            for entry in entries { target.restore(entry.source, tokens: entry.tokens, now: now) }
        }
    }

    /// The RFC 6062 state of TCP allocation `session`, and the account its pipes charge.
    func tcpRelay(session: UInt64) -> (snapshot: TCPRelaySnapshot, account: PipeAccount)? { tcpRelays[session] }

    /// The socket of RFC 6062 peer connection `id` of an allocation loop `loop` served,
    /// connecting or ready, taken once.
    func peerConnection(_ id: PeerConnectionID, loop: Int) -> Int32? {
        take(Key(.peerConnection, loop: loop, session: UInt64(id.value), address: HandoverSocket.noAddress))
    }

    /// The RFC 6062 pipes loop `loop` served, with their sockets and their allocations'
    /// accounts, taken once. A pipe whose allocation did not come charges an account of its own.
    func pipes(loop: Int) -> [(pipe: HandoverPipe, clientFD: Int32, peerFD: Int32, account: PipeAccount)] {
        let mine = pipes.withLock { all in
            let found = all.values.filter { Int($0.loop) == loop }
            for pipe in found { all[pipe.id] = nil }
            return found
        }
        return mine.compactMap { pipe in
            let id = UInt64(pipe.id.value)
            let client = take(Key(.pipeClient, loop: loop, session: id, address: pipe.client))
            let peer = take(Key(.pipePeer, loop: loop, session: id, address: HandoverSocket.noAddress))
            guard let client, let peer else {
                if let client { close(client) }
                if let peer { close(peer) }
                return nil
            }
            let account = tcpRelays[pipe.session]?.account ?? PipeAccount(traffic: PipedTraffic(), budget: nil)
            return (pipe, client, peer, account)
        }
    }

    /// Closes every descriptor no loop took (a listener the new configuration dropped, the
    /// relay socket of an allocation not restored); how many.
    @discardableResult
    func closeUnused() -> Int {
        sockets.withLock { sockets in
            for fd in sockets.values { close(fd) }
            defer { sockets.removeAll() }
            return sockets.count
        }
    }
}
