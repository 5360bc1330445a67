import RelayCore
import CLibevent
import COpenSSL
import CStreamIO
import Glibc
import Logging
import StunCodec
import Synchronization

/// TURN over TCP and TLS on one loop thread: its listeners, its connections (by descriptor), a
/// once-a-second sweep for the abuse deadlines, and `send`, through which the
/// loop's flush hands over packets for stream clients. Runs on the same `event_base` and
/// `RelayCore` as the thread's UDP listeners.
final class StreamTransport {
    unowned let loop: EventLoop
    let service: StreamService
    /// The loop core's logger, whose level follows reloads (`log-level`, `verbose`).
    var logger: Logger { loop.core.logger }
    let limits: (idle: Int64, handshake: Int64)
    private(set) var listeners: [StreamListener] = []
    var connections: [Int32: StreamConnection] = [:]
    /// Data connections piped to peer connections, by connection id (RFC 6062, docs/tcp-relay.md).
    var pipes: [PeerConnectionID: StreamConnection] = [:]
    /// Closed connections waiting to be freed at the start of the next loop iteration.
    private var released: [(connection: StreamConnection, detail: String?)] = []
    private var sweepTimer: OpaquePointer?
    private var releaseEvent: OpaquePointer?
    /// What one read(2) of a TLS socket takes in (ciphertext, before OpenSSL decrypts it).
    let cipherBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    /// Where a connection's plaintext is framed: a kept part frame, then what was read or
    /// decrypted behind it (room for at least one whole frame more).
    let frameBuffer = UnsafeMutableRawBufferPointer.allocate(
        byteCount: 2 * StreamConnection.maxFrameLength, alignment: 16)
    /// Connections written to in this loop iteration; their sockets are written at its end
    /// (`writeUnflushed`), once each, instead of after the next epoll round.
    private var unflushed: [StreamConnection] = []
    private var writeEvent: LoopEvent?
    var counters = StreamCounters()
    /// The 5-tuples PROXY headers gave this loop's open connections: no two may share one.
    var proxiedTuples: Set<FiveTuple> = []
    /// Idle connections that gave their buffers back in this sweep.
    var buffersReleased = 0
    /// TCP connections a live upgrade is handing over (`pauseForHandover`), until it commits or
    /// fails.
    var handingOver: [StreamConnection] = []
    /// RFC 6062 pipes a live upgrade is handing over (`pausePipesForHandover`).
    var handingOverPipes: [StreamConnection] = []

    /// Pending output beyond which a client that does not read is disconnected.
    static let maxOutputBytes = 1 << 20
    /// Seconds a half-closed connection may take to accept its last answers.
    static let drainSeconds: Int64 = 5

    init(loop: EventLoop, service: StreamService) {
        self.loop = loop
        self.service = service
        limits = (Int64(service.configuration.tcpIdleTimeout), Int64(service.configuration.tlsHandshakeTimeout))
    }

    deinit {
        cipherBuffer.deallocate()
        frameBuffer.deallocate()
    }

    /// Opens this thread's TCP and TLS listeners and its timers; the failure to report, if any.
    func start() -> String? {
        let shared = Set(service.sharedAddresses)
        let lists = [
            (service.tcpAddresses, TransportProtocol.tcp, false), (service.tlsOnlyAddresses, .tls, false),
            (service.apiOnlyAddresses, .tcp, true),
        ]
        for (addresses, transport, apiOnly) in lists {
            for address in addresses {
                let listener = StreamListener(
                    address: address, transport: transport, sharedWithTLS: shared.contains(address), apiOnly: apiOnly,
                    owner: self)
                let inherited = loop.wiring.inheritance?.listener(
                    transport == .tls ? .tlsListener : .tcpListener, loop: loop.wiring.index.value, address: address)
                guard listener.open(base: loop.base, inherited: inherited) else {
                    return "cannot bind \(transport.label.uppercased()) \(address): \(String(cString: strerror(errno)))"
                }
                listeners.append(listener)
            }
        }
        guard !listeners.isEmpty else { return nil }
        let me = Unmanaged.passUnretained(self).toOpaque()
        loop.core.streamHooks = StreamSinkHooks(sink: { [unowned self] origin in
            connections[origin.socket.descriptor].flatMap { $0.origin == origin ? $0 : nil }
        })
        writeEvent = LoopEvent(base: loop.base) { [unowned self] in writeUnflushed() }
        sweepTimer = event_new(
            loop.base, -1, Int16(EV_PERSIST),
            { _, _, arg in Unmanaged<StreamTransport>.fromOpaque(arg!).takeUnretainedValue().sweep() }, me)
        var second = timeval(tv_sec: 1, tv_usec: 0)
        event_add(sweepTimer, &second)
        releaseEvent = event_new(
            loop.base, -1, 0,
            { _, _, arg in Unmanaged<StreamTransport>.fromOpaque(arg!).takeUnretainedValue().releaseClosed() }, me)
        return nil
    }

    // MARK: Accepting

    func accept(_ fd: Int32, from client: TransportAddress, on listener: StreamListener) {
        let opening = service.opening(on: listener, from: client.ip)
        // A listed balancer's connection meets the limits once its PROXY header named the client.
        let fromBalancer = opening?.proxyHeader == true
        if let refusal = fromBalancer ? service.limiter.admitUnattributed() : service.limiter.admit(client.ip) {
            counters.refused[refusal.rawValue] &+= 1
            Glibc.close(fd)
            logger.debug(
                "connection refused",
                metadata: ["event": "connection_refused", "client": "\(client)", "reason": "\(refusal.label)"])
            return
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
        let origin = ClientOrigin(
            fiveTuple: FiveTuple(client: client, server: listener.address, transport: listener.transport),
            socket: ClientSocket(descriptor: fd))
        guard let connection = makeConnection(fd, origin: origin, opening: opening) else {
            if fromBalancer {
                service.limiter.releaseUnattributed()
            } else {
                service.limiter.release(client.ip, pending: true)
            }
            counters.refused[StreamRefusal.resources.rawValue] &+= 1
            return
        }
        connection.holdsLimiterSlot = !fromBalancer
        connection.holdsUnattributedSlot = fromBalancer
        connections[fd] = connection
        // A connection whose first bytes decide is counted once they did.
        if !listener.sharedWithTLS && !listener.apiOnly { counters.accepted[Int(listener.transport.rawValue)] &+= 1 }
        counters.open += 1
        connection.start(base: loop.base)
    }

    /// A connection over `fd`; for TLS with a session from the TLS context current now (after a
    /// SIGHUP reload, the new one), unless its first bytes decide (`opening`: then the session
    /// comes once they did). Owns `fd` from here on, also on failure.
    private func makeConnection(_ fd: Int32, origin: ClientOrigin, opening: StreamOpening.Expected?)
        -> StreamConnection?
    {
        var ssl: OpaquePointer?
        if origin.fiveTuple.transport == .tls, opening == nil {
            guard let context = service.tls.value, let session = SSL_new(context.context) else {
                Glibc.close(fd)
                return nil
            }
            ssl = session
        }
        let connection = StreamConnection(
            socket: fd, ssl: ssl, origin: origin, owner: self, now: EventLoop.now(), opening: opening)
        if connection == nil {
            if let ssl { SSL_free(ssl) }
            Glibc.close(fd)
        }
        return connection
    }

    func acceptPaused(_ listener: StreamListener, error: Int32) {
        counters.acceptErrors &+= 1
        logger.warning(
            "accept failed, pausing the listener for a second: \(String(cString: strerror(error)))",
            metadata: [
                "event": "accept_failed", "listener": "\(listener.transport.label) \(listener.address)",
                "open_connections": "\(service.limiter.total)",
            ])
    }

    func handshakeCompleted() { counters.tlsHandshakesCompleted &+= 1 }

    /// `connection` got its first allocation: it stops counting as pending (docs/rate-limits.md).
    func connectionAllocated(_ connection: StreamConnection) {
        guard !connection.hasAllocated else { return }
        connection.hasAllocated = true
        service.limiter.allocated(connection.origin.fiveTuple.client.ip)
    }

    /// The connection on `socket` with `fiveTuple` got an allocation (a session started).
    func connectionAllocated(socket: ClientSocket, fiveTuple: FiveTuple) {
        guard let connection = connections[socket.descriptor], connection.origin.fiveTuple == fiveTuple else { return }
        connectionAllocated(connection)
    }

    /// `CoreCommand.bindDataConnection`: the data connection becomes a pipe (RFC 6062 §5.4); it
    /// no longer counts as pending against its source's limit. False when it is gone.
    /// Queues a `deliverToStream` packet on a connection of any loop; false when the connection
    /// refuses it (closing, or over its output bound).
    func deliver(_ delivery: StreamDelivery) -> Bool {
        queue(delivery.bytes, on: unsafeDowncast(delivery.sink, to: StreamConnection.self))
    }

    /// Ends the pipe of peer connection `id` on this loop, if it runs here (its allocation
    /// ended on another loop).
    func endPipe(_ id: PeerConnectionID) { pipes[id]?.close(.relayEnded) }

    /// Turns a data connection of this loop into a pipe (`CoreCommand.bindDataConnection`);
    /// false when the connection is gone.
    func startPipe(_ bind: DataConnectionBind) -> Bool {
        guard let connection = connections[bind.origin.socket.descriptor], connection.origin == bind.origin,
            connection.state == .open, connection.pipe == nil
        else { return false }
        guard connection.startPipe(id: bind.id, peerSocket: bind.peerSocket, account: bind.account) else {
            // The pipe owns the socket now: it closes with the connection.
            pipes[bind.id] = connection
            connection.close(.error, detail: "cannot register the peer connection")
            return true
        }
        pipes[bind.id] = connection
        connectionAllocated(connection)
        return true
    }

    // MARK: Sending

    /// A packet the core queued for a TCP/TLS client, from the loop's flush.
    @inline(__always)
    func send(_ bytes: UnsafeRawBufferPointer, to origin: ClientOrigin) {
        guard let connection = connections[origin.socket.descriptor], connection.origin == origin else {
            counters.sendsToClosed &+= 1
            return
        }
        queue(bytes, on: connection)
    }

    /// Queues a packet on a connection of this loop (`send`) or, relay-to-relay, of any loop
    /// (`StreamSinkHooks.write`): this loop writes the socket at the end of its iteration, so
    /// another owning loop is not woken. A refusing connection of this loop is closed at once;
    /// another loop's owner closes its own at its sweep. False when the packet was refused.
    @discardableResult
    @inline(__always)
    func queue(_ bytes: UnsafeRawBufferPointer, on connection: StreamConnection) -> Bool {
        switch connection.enqueue(bytes) {
        case .queued(let schedule):
            if schedule { noteUnflushed(connection) }
            return true
        case .refused:
            if connection.owner === self { connection.closeIfRefusing() }
            return false
        }
    }

    /// `connection` (of this loop or another) has new output: it is written once the
    /// iteration's other ready events ran.
    func noteUnflushed(_ connection: StreamConnection) {
        if unflushed.isEmpty { writeEvent?.activate() }
        unflushed.append(connection)
    }

    /// Writes the output of every connection written to in this iteration (one write(2) each).
    private func writeUnflushed() {
        var index = 0
        while index < unflushed.count {
            let connection = unflushed[index]
            connection.writeNow(onOwner: connection.owner === self)
            index += 1
        }
        unflushed.removeAll(keepingCapacity: true)
    }

    // MARK: Deadlines and closing

    /// Once a second: TLS handshake and idle deadlines, draining bound, paused listeners.
    private func sweep() {
        let now = EventLoop.now()
        let core = loop.core!
        // A connection a live upgrade is handing over is the heir's to judge: its socket must
        // stay open until the heir has it (docs/live-upgrade.md).
        for connection in connections.values where !connection.handingOver {
            connection.checkDeadlines(now: now) { core.allocation(for: $0.fiveTuple) != nil }
            // Its allocation ended (Refresh 0, expiry, kick) and the connection stays: pending again.
            if connection.hasAllocated, connection.pipe == nil, connection.state == .open,
                core.allocation(for: connection.origin.fiveTuple) == nil
            {
                connection.hasAllocated = false
                service.limiter.pendingAgain(connection.origin.fiveTuple.client.ip)
            }
        }
        for listener in listeners {
            if let until = listener.pausedUntil, until <= now { listener.resume() }
        }
        // Freed record buffers sit in the allocator's free lists, resident, until trimmed:
        // give the whole free pages back once a sweep freed many (docs/benchmark.md).
        // One loop at a time, at most every `trimSeconds`: a trim walks every arena. The count
        // goes on until this loop trims, so a loop refused for another's recent trim tries
        // again at a later sweep instead of leaving its freed pages resident.
        if buffersReleased >= Self.trimAfterReleases {
            let last = Self.lastTrim.load(ordering: .relaxed)
            if now - last >= Self.trimSeconds,
                Self.lastTrim.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged
            {
                _ = relayd_trim_heap()
                buffersReleased = 0
            }
        }
    }

    /// Connections that gave their buffers back since this loop last trimmed the allocator,
    /// before it trims again.
    static let trimAfterReleases = 64
    /// Seconds between two trims, all loops together, and when the last one was.
    static let trimSeconds: Int64 = 5
    static let lastTrim = Atomic<Int64>(0)

    /// Called by a connection that has just closed: it is freed in the next loop iteration.
    func scheduleRelease(_ connection: StreamConnection, detail: String?) {
        released.append((connection, detail))
        if released.count == 1, let releaseEvent { event_active(releaseEvent, EV_TIMEOUT, 1) }
    }

    /// Frees closed connections: ends their allocations (RFC 8656: the allocation lives as long as
    /// the connection), closes their sockets, gives back their limiter slots.
    private func releaseClosed() {
        let batch = released
        released.removeAll(keepingCapacity: true)
        let now = EventLoop.now()
        for (connection, detail) in batch {
            release(connection, now: now, detail: detail)
        }
        loop.flush()
    }

    private func release(_ connection: StreamConnection, now: Int64, detail: String?) {
        let origin = connection.origin
        connections[origin.socket.descriptor] = nil
        if connection.proxied { proxiedTuples.remove(origin.fiveTuple) }
        if let pipe = connection.pipe {
            connection.endSplice()
            if let name = pipe.apiName {
                service.apiHandoff?.forget(name)
            } else {
                pipes[pipe.id] = nil
                loop.core.tables.tcpConnections.remove(pipe.id)
            }
            pipe.free()
        }
        loop.core.connectionClosed(origin, now: now)
        let reason = connection.closeReason ?? .error
        connection.free()
        if connection.holdsLimiterSlot {
            service.limiter.release(origin.fiveTuple.client.ip, pending: !connection.hasAllocated)
        } else if connection.holdsUnattributedSlot {
            service.limiter.releaseUnattributed()
        }
        counters.closed[reason.rawValue] &+= 1
        if !connection.handshakeDone { counters.tlsHandshakesFailed &+= 1 }
        counters.open -= 1
        if logger.logLevel <= .debug {
            logger.debug(
                "connection closed",
                metadata: [
                    "event": "connection_closed", "five_tuple": "\(origin.fiveTuple)", "reason": "\(reason.label)",
                    "detail": "\(detail ?? "-")", "duration_s": "\(now - connection.acceptedAt)",
                ])
        }
    }

    /// Loop exit: closes every listener and connection before the `event_base` goes away.
    /// A live upgrade's heir accepts now (docs/live-upgrade.md): this loop's listeners close;
    /// its connections go on.
    func closeListeners() {
        for listener in listeners { listener.close() }
        listeners.removeAll()
    }

    func shutdown() {
        loop.core.streamHooks = StreamSinkHooks()
        for listener in listeners { listener.close() }
        listeners.removeAll()
        if let sweepTimer { event_free(sweepTimer) }
        if let releaseEvent { event_free(releaseEvent) }
        sweepTimer = nil
        releaseEvent = nil
        let now = EventLoop.now()
        for (connection, detail) in released { release(connection, now: now, detail: detail) }
        released.removeAll()
        for connection in Array(connections.values) {
            connection.close(.shutdown)
        }
        for (connection, detail) in released { release(connection, now: now, detail: detail) }
        released.removeAll()
        // The core's commands for allocations that ended with their connections (summaries, relay sockets).
        loop.flush()
    }
}

extension StreamTransport {
    /// Adds this thread's TCP/TLS figures to its metrics snapshot.
    func contribute(to metrics: inout LoopMetrics) {
        metrics.tlsHandshakesOK = counters.tlsHandshakesCompleted
        metrics.tlsHandshakesFailed = counters.tlsHandshakesFailed
        metrics.tlsOwnRecords = counters.tlsOwnRecords
        // Element by element: the counters' array stays this thread's alone (no copy on its next increment).
        for i in metrics.connectionsRefused.indices { metrics.connectionsRefused[i] = counters.refused[i] }
        for i in metrics.connectionsAccepted.indices { metrics.connectionsAccepted[i] = counters.accepted[i] }
        for i in metrics.connectionsClosed.indices { metrics.connectionsClosed[i] = counters.closed[i] }
        metrics.apiConnections = counters.apiConnections
        metrics.splicedPipes = counters.splicedPipes
        metrics.splicedBytesToPeer = counters.splicedBytesToPeer
        metrics.splicedBytesToClient = counters.splicedBytesToClient
        metrics.splicedOldBytes = counters.splicedOldBytes
    }
}
