import RelayCore
import CLibevent
import Glibc
import Logging
import StunCodec

/// One loop thread's sockets for TCP allocations (RFC 6062): the listener on each allocation's
/// relayed address, and the connects Connect requests asked for. A peer connection, connected
/// or accepted, is parked in the shared `TCPConnectionTable` until a ConnectionBind on any
/// thread takes it (docs/tcp-relay.md); this loop closes the parked ones whose 30 s run out,
/// and every connection of an allocation that ends here.
final class TCPRelaySockets {
    unowned let loop: EventLoop
    /// Accept events by relay listener descriptor.
    var listeners: [Int32: OpaquePointer] = [:]
    /// Connects in progress by socket descriptor.
    var connecting: [Int32: (request: PeerConnect, event: OpaquePointer)] = [:]
    /// Connects that failed at once, answered (447) from `failureEvent`: a Connect is started
    /// while the loop executes the core's commands, after that flush's packets went out.
    private var failedAtOnce: [PeerConnect] = []
    /// Listeners resting after an accept error; the sweep adds them back.
    var paused: Set<Int32> = []
    /// Listeners of allocations a live upgrade is handing over (`TCPRelaySockets+Handover.swift`).
    var handingOver: Set<Int32> = []
    private lazy var failureEvent = LoopEvent(base: loop.base) { [unowned self] in answerFailures() }

    init(loop: EventLoop) { self.loop = loop }

    var table: TCPConnectionTable { loop.core.tables.tcpConnections }
    var thread: LoopIndex { loop.core.context.loop }

    /// Connections a relay listener's backlog holds before the kernel refuses more.
    static let backlog: Int32 = 64
    /// Peer connections taken per readiness event.
    static let acceptsPerWakeup = 16

    /// A TCP socket bound to `address` and listening, with its accept event. SO_REUSEPORT lets
    /// the sockets that connect out from the same relayed address (Connect) share its port.
    func openListener(bound address: TransportAddress) -> RelaySocketOpening {
        guard let fd = Self.socket(bound: address) else { return RelaySocketOpening(failure: errno) }
        guard listen(fd, Self.backlog) == 0 else {
            let failure = RelaySocketOpening(failure: errno)
            Glibc.close(fd)
            return failure
        }
        return watch(listener: fd)
    }

    /// Accepts peers on the listening socket `fd` from now on; closed when its event cannot be made.
    func watch(listener fd: Int32) -> RelaySocketOpening {
        guard
            let event = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), { fd, _, arg in
                Unmanaged<TCPRelaySockets>.fromOpaque(arg!).takeUnretainedValue().acceptPeers(fd)
            }, Unmanaged.passUnretained(self).toOpaque())
        else {
            let failure = RelaySocketOpening(failure: errno)
            Glibc.close(fd)
            return failure
        }
        event_add(event, nil)
        listeners[fd] = event
        return .opened(RelaySocket(descriptor: fd))
    }

    /// A non-blocking TCP socket bound to `address` with SO_REUSEADDR and SO_REUSEPORT.
    private static func socket(bound address: TransportAddress) -> Int32? {
        let family = address.ip.family == .ipv6 ? AF_INET6 : AF_INET
        let fd = Glibc.socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, 4)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, 4)
        if family == AF_INET6 { setsockopt(fd, ipv6OptionLevel, IPV6_V6ONLY, &one, 4) }
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
        var storage = sockaddr_storage()
        let bound = withUnsafeMutableBytes(of: &storage) { raw -> Bool in
            let length = SocketAddress.write(address, into: raw.baseAddress!)
            return bind(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length) == 0
        }
        guard bound else {
            let failure = errno
            Glibc.close(fd)
            errno = failure
            return nil
        }
        return fd
    }

    // MARK: Peers connecting in (RFC 6062 §5.3)

    private func acceptPeers(_ listener: Int32) {
        let now = EventLoop.now()
        for _ in 0..<Self.acceptsPerWakeup {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutableBytes(of: &storage) { raw in
                accept(listener, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
            }
            guard fd >= 0 else {
                if errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED {
                    pause(listener)
                }
                break
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let peer = withUnsafeBytes(of: &storage) { SocketAddress.read($0.baseAddress!) }
            guard let peer, let id = loop.core.peerConnectionArrived(on: RelaySocket(descriptor: listener), from: peer, now: now),
                table.park(id, peerSocket: PeerSocket(descriptor: fd), deadline: now + RelayCore.tcpBindSeconds)
            else {
                Glibc.close(fd)
                continue
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
        }
        loop.flush()
    }

    /// Out of descriptors or memory: the listener rests for a second instead of firing on every
    /// loop iteration (the kernel keeps the peers in its backlog meanwhile).
    private func pause(_ listener: Int32) {
        guard let event = listeners[listener] else { return }
        event_del(event)
        paused.insert(listener)
    }

    // MARK: Connecting out (RFC 6062 §5.2)

    /// The core's `connectPeer`: a non-blocking connect from the relayed address; its outcome
    /// goes back to the core when the socket turns writable, or after `tcpConnectSeconds`.
    func connect(_ request: PeerConnect) {
        guard let fd = Self.socket(bound: request.relayed) else { return failAtOnce(request) }
        var storage = sockaddr_storage()
        let started = withUnsafeMutableBytes(of: &storage) { raw -> Bool in
            let length = SocketAddress.write(request.peer, into: raw.baseAddress!)
            return Glibc.connect(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length) == 0 || errno == EINPROGRESS
        }
        guard started, watch(connecting: fd, for: request, seconds: RelayCore.tcpConnectSeconds) else {
            Glibc.close(fd)
            return failAtOnce(request)
        }
    }

    /// Waits for the connect on `fd` to end, for at most `seconds`; false when its event cannot
    /// be made.
    func watch(connecting fd: Int32, for request: PeerConnect, seconds: Int64) -> Bool {
        guard
            let event = event_new(loop.base, fd, Int16(EV_WRITE), { fd, what, arg in
                Unmanaged<TCPRelaySockets>.fromOpaque(arg!).takeUnretainedValue().connectEnded(fd, timedOut: what & Int16(EV_TIMEOUT) != 0)
            }, Unmanaged.passUnretained(self).toOpaque())
        else { return false }
        var timeout = timeval(tv_sec: Int(max(seconds, 1)), tv_usec: 0)
        event_add(event, &timeout)
        connecting[fd] = (request, event)
        return true
    }

    private func failAtOnce(_ request: PeerConnect) {
        if failedAtOnce.isEmpty { failureEvent.activate() }
        failedAtOnce.append(request)
    }

    /// Answers the Connects whose connect failed at once now, rather than at the event's turn
    /// (a live upgrade's pause, so the answers go out before the control connection pauses).
    func answerFailures() {
        let failed = failedAtOnce
        failedAtOnce.removeAll()
        for request in failed { finish(request, socket: -1, connected: false) }
        loop.flush()
    }

    private func connectEnded(_ fd: Int32, timedOut: Bool) {
        guard let (request, event) = connecting.removeValue(forKey: fd) else { return }
        event_free(event)
        var error: Int32 = 0
        var length = socklen_t(4)
        let connected = !timedOut && getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0
        finish(request, socket: fd, connected: connected)
        loop.flush()
    }

    /// Tells the core; a connected socket the allocation still wants is parked for its
    /// ConnectionBind, anything else is closed.
    private func finish(_ request: PeerConnect, socket fd: Int32, connected: Bool) {
        let now = EventLoop.now()
        let keep = loop.core.peerConnectFinished(request.id, relaySocket: request.relaySocket, connected: connected, now: now)
        if keep && table.park(request.id, peerSocket: PeerSocket(descriptor: fd), deadline: now + RelayCore.tcpBindSeconds) { return }
        if fd >= 0 { Glibc.close(fd) }
    }

    // MARK: Ending

    /// The allocation of `socket` ended: if it was a TCP allocation's listener, its connects are
    /// abandoned, its parked peer sockets closed and its pipes on any thread told to end; the
    /// listener itself closes with the loop's other relay sockets. False for a UDP relay socket.
    func endRelay(_ socket: RelaySocket) -> Bool {
        guard let event = listeners.removeValue(forKey: socket.descriptor) else { return false }
        event_free(event)
        paused.remove(socket.descriptor)
        for (fd, pending) in connecting where pending.request.relaySocket == socket {
            event_free(pending.event)
            connecting[fd] = nil
            Glibc.close(fd)
        }
        for entry in table.removeAll(thread: thread, relaySocket: socket) { release(entry) }
        return true
    }

    private func release(_ entry: TCPConnectionTable.Entry) {
        switch entry.state {
        case .ready(let peerSocket): Glibc.close(peerSocket.descriptor)
        case .bound(let pipeThread): loop.post(.closePipe(entry.id), to: pipeThread)
        case .connecting: break
        }
    }

    /// Once a second: peer connections that waited 30 s for a ConnectionBind are closed (RFC 6062 §5.3).
    func sweep(now: Int64) {
        for listener in paused {
            if let event = listeners[listener] { event_add(event, nil) }
        }
        paused.removeAll()
        for entry in table.expire(thread: thread, now: now) {
            loop.core.counters.tcpConnections[TCPConnectionOutcome.expired.rawValue] &+= 1
            release(entry)
        }
    }

    /// Loop exit: every listener, connect and parked socket of this thread.
    func shutdown() {
        for fd in Array(listeners.keys) { _ = endRelay(RelaySocket(descriptor: fd)) }
        for (fd, pending) in connecting {
            event_free(pending.event)
            Glibc.close(fd)
        }
        connecting.removeAll()
    }
}
