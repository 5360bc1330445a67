import RelayCore
import CLibevent
import COpenSSL
import CStreamIO
import Glibc
import Logging
import StunCodec

/// TURN over DTLS on one loop thread (docs/dtls.md): its listeners on the TLS ports (UDP,
/// SO_REUSEPORT), the cookie exchange on them (RFC 6347 §4.2.1: a ClientHello without a valid
/// cookie gets a HelloVerifyRequest and costs no state), and a `DTLSSession` per client that
/// came back with its cookie. Sessions count against the TCP/TLS connection limits
/// (`max-pending-connections` and `max-connections` with their shares, and the per-source caps); a handshake
/// that does not finish within `tls-handshake-timeout` ends, and so does a session idle for
/// `tcp-idle-timeout` without an allocation. A client that restarts from the same address and port
/// meets the cookie exchange on its session's socket (RFC 6347 §4.2.8,
/// DTLSTransport+Restart.swift).
final class DTLSTransport {
    unowned let loop: EventLoop
    let service: StreamService
    private var listeners: [(fd: Int32, address: TransportAddress, event: OpaquePointer)] = []
    /// The session DTLSv1_listen is using on each listener, kept between readable events.
    private var listening: [Int32: OpaquePointer] = [:]
    /// The replaying filter of each UDP listener DTLS shares with plain STUN/TURN, by its socket
    /// (`sharedDatagram`).
    private var sharedFilters: [Int32: OpaquePointer] = [:]
    var sessions: [Int32: DTLSSession] = [:]
    private var sweepTimer: LoopEvent?
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 16)
    var handshakes = (completed: UInt64(0), failed: UInt64(0))
    /// Restarted sessions by the new handshake's result (RFC 6347 §4.2.8).
    var restarts = (completed: UInt64(0), failed: UInt64(0))
    /// HelloVerifyRequests sent from sessions' sockets, and datagrams dropped there before OpenSSL.
    var sessionHelloVerifyRequests = UInt64(0)
    var sessionDrops = UInt64(0)
    /// Datagrams in DTLS's range that UDP listeners DTLS shares passed on and that were dropped
    /// (no ClientHello, too large).
    var sharedPortDrops = UInt64(0)

    var logger: Logger { loop.core.logger }
    private var limits: (idle: Int64, handshake: Int64) {
        (Int64(service.configuration.tcpIdleTimeout), Int64(service.configuration.tlsHandshakeTimeout))
    }

    init(loop: EventLoop, service: StreamService) {
        self.loop = loop
        self.service = service
    }

    deinit { buffer.deallocate() }

    /// Opens this thread's DTLS listeners; the failure to report, if any.
    func start() -> String? {
        for address in service.dtlsAddresses {
            let inherited = loop.wiring.inheritance?.listener(.dtlsListener, loop: loop.wiring.index.value, address: address)
            guard let fd = inherited ?? UDPSocket.open(bound: address, reusePort: true) else {
                return "cannot bind DTLS (UDP) \(address): \(String(cString: strerror(errno)))"
            }
            guard let event = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), { fd, _, arg in
                Unmanaged<DTLSTransport>.fromOpaque(arg!).takeUnretainedValue().listenerReadable(fd)
            }, Unmanaged.passUnretained(self).toOpaque()) else {
                close(fd)
                return "cannot register the DTLS listener on \(address)"
            }
            event_add(event, nil)
            listeners.append((fd, address, event))
        }
        guard !listeners.isEmpty || !service.dtlsSharedAddresses.isEmpty else { return nil }
        sweepTimer = LoopEvent(base: loop.base, every: timeval(tv_sec: 1, tv_usec: 0)) { [unowned self] in sweep() }
        return nil
    }

    // MARK: Live upgrade (docs/live-upgrade.md)

    /// Stops reading the listeners; their descriptors and addresses, for the heir. Sessions
    /// have sockets of their own and go on.
    func pauseListeners() -> [(Int32, TransportAddress)] {
        for listener in listeners { event_del(listener.event) }
        return listeners.map { ($0.fd, $0.address) }
    }

    func resumeListeners() {
        for listener in listeners { event_add(listener.event, nil) }
    }

    /// The heir reads the listeners now: this process's copies close.
    func closeListeners() {
        for listener in listeners {
            event_free(listener.event)
            if let ssl = listening.removeValue(forKey: listener.fd) { SSL_free(ssl) }
            close(listener.fd)
        }
        listeners.removeAll()
    }

    // MARK: The cookie exchange

    /// Runs DTLSv1_listen over what the listener holds: ClientHellos without a cookie are
    /// answered statelessly, anything else that is not a ClientHello is dropped, and a
    /// ClientHello with a valid cookie starts a session.
    private func listenerReadable(_ fd: Int32) {
        guard let listener = listeners.first(where: { $0.fd == fd }) else { return }
        for _ in 0..<64 {
            // DTLSv1_listen answers 0 for each datagram it drops as well as when nothing is left:
            // go on while the socket holds something.
            var byte: UInt8 = 0
            guard recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) >= 0 else { return }
            guard let ssl = currentListening(fd) else { return drain(fd) }
            var client = sockaddr_storage()
            ERR_clear_error()
            let result = relayd_dtls_listen(ssl, &client)
            if result == 0 { continue }
            listening[fd] = nil
            guard result == 1, let address = withUnsafeBytes(of: &client, { SocketAddress.read($0.baseAddress!) }) else {
                SSL_free(ssl)
                continue
            }
            accept(ssl, client: address, raw: &client, on: listener.address)
        }
    }

    /// A DTLS datagram (first byte 20 to 63, RFC 7983 §7) that a UDP listener DTLS shares with
    /// plain STUN/TURN read (docs/dtls.md, "On a port plain UDP shares"): the same cookie
    /// exchange as on a DTLS listener, over that one datagram; a ClientHello with a valid cookie
    /// starts a session on a socket of its own, as there.
    func sharedDatagram(_ bytes: UnsafeRawBufferPointer, source: UnsafeRawPointer, listener fd: Int32, on address: TransportAddress) {
        guard let filter = sharedFilter(fd), let ssl = currentListening(fd, filter: filter), let base = bytes.baseAddress
        else {
            sharedPortDrops &+= 1
            return
        }
        var client = sockaddr_storage()
        ERR_clear_error()
        let result = relayd_dtls_listen_datagram(ssl, filter, base, bytes.count, source, &client)
        sharedPortDrops &+= UInt64(relayd_dtls_io_take_dropped(filter))
        if result == -1 {
            // OpenSSL failed on this session: the next datagram gets a new one.
            listening[fd] = nil
            SSL_free(ssl)
        }
        guard result == 1 else { return }
        listening[fd] = nil
        guard let peer = withUnsafeBytes(of: &client, { SocketAddress.read($0.baseAddress!) }) else {
            SSL_free(ssl)
            return
        }
        accept(ssl, client: peer, raw: &client, on: address)
    }

    /// The UDP listeners `fds` went to a live upgrade's heir: their listening sessions and
    /// filters go (the descriptor numbers may be reused).
    func forgetSharedListeners(_ fds: Set<Int32>) {
        for fd in fds {
            if let ssl = listening.removeValue(forKey: fd) { SSL_free(ssl) }
            if let filter = sharedFilters.removeValue(forKey: fd) { relayd_dtls_io_free(filter) }
        }
    }

    private func sharedFilter(_ fd: Int32) -> OpaquePointer? {
        if let filter = sharedFilters[fd] { return filter }
        guard let filter = relayd_dtls_io_new() else { return nil }
        sharedFilters[fd] = filter
        return filter
    }

    /// The listening session of `fd`, made anew when the context was reloaded since (SIGHUP):
    /// the next client gets the new certificate. With `filter`, over a UDP listener shared with
    /// plain STUN/TURN.
    private func currentListening(_ fd: Int32, filter: OpaquePointer? = nil) -> OpaquePointer? {
        guard let context = service.dtls.value else { return nil }
        if let ssl = listening[fd] {
            if SSL_get_SSL_CTX(ssl) == context.context { return ssl }
            SSL_free(ssl)
            listening[fd] = nil
        }
        guard let ssl = SSL_new(context.context) else { return nil }
        let attached = filter.map { relayd_dtls_use_listener_socket(ssl, fd, $0) } ?? relayd_dtls_use_socket(ssl, fd, nil)
        guard attached == 0 else {
            SSL_free(ssl)
            return nil
        }
        listening[fd] = ssl
        return ssl
    }

    /// Without a context or memory: what the listener holds is read and dropped.
    private func drain(_ fd: Int32) {
        while recv(fd, buffer.baseAddress!, buffer.count, Int32(MSG_DONTWAIT)) >= 0 {}
    }

    /// A client came back with its cookie: its own socket, connected to it, takes its datagrams
    /// from here on, and the handshake goes on there.
    private func accept(
        _ ssl: OpaquePointer, client: TransportAddress, raw: inout sockaddr_storage, on address: TransportAddress
    ) {
        // The same client's ClientHello twice (duplicated or retransmitted while this loop was
        // busy): the session it has already goes on.
        if sessions.values.contains(where: { $0.origin.fiveTuple.client == client && $0.origin.fiveTuple.server == address }) {
            SSL_free(ssl)
            return
        }
        if let refusal = service.limiter.admit(client.ip) {
            SSL_free(ssl)
            logger.debug(
                "DTLS session refused",
                metadata: ["event": "connection_refused", "client": "\(client)", "reason": "\(refusal.label)"])
            return
        }
        guard let io = relayd_dtls_io_new() else {
            SSL_free(ssl)
            service.limiter.release(client.ip, pending: true)
            return
        }
        guard let fd = UDPSocket.open(bound: address, reusePort: true, bufferBytes: 256 * 1024) else {
            SSL_free(ssl)
            relayd_dtls_io_free(io)
            service.limiter.release(client.ip, pending: true)
            return
        }
        let connected = withUnsafeBytes(of: &raw) {
            connect(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(MemoryLayout<sockaddr_storage>.size))
        }
        guard connected == 0, relayd_dtls_use_session_socket(ssl, fd, &raw, io) == 0 else {
            SSL_free(ssl)
            relayd_dtls_io_free(io)
            close(fd)
            service.limiter.release(client.ip, pending: true)
            return
        }
        let origin = ClientOrigin(
            fiveTuple: FiveTuple(client: client, server: address, transport: .dtls), socket: ClientSocket(descriptor: fd))
        let session = DTLSSession(socket: fd, ssl: ssl, io: io, peer: raw, origin: origin, now: EventLoop.now())
        session.readEvent = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), { fd, _, arg in
            Unmanaged<DTLSTransport>.fromOpaque(arg!).takeUnretainedValue().sessionReadable(fd)
        }, Unmanaged.passUnretained(self).toOpaque())
        sessions[fd] = session
        guard session.readEvent != nil else { return end(session, reason: "cannot register the socket") }
        event_add(session.readEvent, nil)
        // The ServerHello flight: DTLSv1_listen took the ClientHello already.
        sessionReadable(fd)
    }

    // MARK: Sessions

    /// Every record the session's socket holds: the handshake, then one STUN message or
    /// ChannelData per record to the core.
    private func sessionReadable(_ fd: Int32) {
        guard let session = sessions[fd] else { return }
        let now = EventLoop.now()
        // At most 64 records a wake-up: a client that sends faster than this thread relays
        // shares it with the others (its socket buffer takes the rest, or drops it).
        for _ in 0..<64 {
            ERR_clear_error()
            let count = SSL_read(session.ssl, buffer.baseAddress!, Int32(buffer.count))
            let error = count > 0 ? SSL_ERROR_NONE : SSL_get_error(session.ssl, count)
            sessionDrops &+= UInt64(relayd_dtls_io_take_dropped(session.io))
            if !session.handshakeDone, SSL_is_init_finished(session.ssl) == 1 { handshakeCompleted(session) }
            if relayd_dtls_io_has_hello(session.io) == 1 {
                // A ClientHello on a session whose handshake is done (RFC 6347 §4.2.8): the
                // cookie check, and a new handshake if it passes; then read on.
                clientHelloArrived(on: session, now: now)
                continue
            }
            guard count > 0 else {
                switch error {
                case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                    break
                case SSL_ERROR_ZERO_RETURN:
                    end(session, reason: "close_notify")
                default:
                    end(session, reason: session.handshakeDone ? "error" : "handshake failed")
                }
                loop.flush()
                return
            }
            session.lastInputAt = now
            loop.core.handleClientPacket(
                UnsafeRawBufferPointer(rebasing: buffer[..<Int(count)]), from: session.origin, now: now)
            if loop.core.outbox.needsFlush { loop.flush() }
        }
        // Records OpenSSL read ahead of the cap wait in the session, not the socket: come back.
        if SSL_has_pending(session.ssl) == 1 { event_active(session.readEvent, Int32(EV_READ), 0) }
        loop.flush()
    }

    /// From the loop's flush: one record per packet, sent at once on the session's socket (a
    /// full socket drops it, as UDP would).
    func send(_ bytes: UnsafeRawBufferPointer, to origin: ClientOrigin) {
        guard let session = sessions[origin.socket.descriptor], session.origin == origin, session.handshakeDone,
            let base = bytes.baseAddress
        else { return }
        ERR_clear_error()
        _ = SSL_write(session.ssl, base, Int32(bytes.count))
    }

    /// Ends a session and its allocation (the allocation lives as long as the session).
    private func end(_ session: DTLSSession, reason: String) {
        guard sessions.removeValue(forKey: session.socket) != nil else { return }
        sessionDrops &+= UInt64(relayd_dtls_io_take_dropped(session.io))
        if !session.handshakeDone {
            handshakes.failed &+= 1
            // A restart that did not finish: the allocation it carried goes with the session.
            if session.restarting { restarts.failed &+= 1 }
        }
        loop.core.connectionClosed(session.origin, now: EventLoop.now())
        service.limiter.release(session.origin.fiveTuple.client.ip, pending: !session.hasAllocated)
        session.free()
        logger.debug(
            "DTLS session closed",
            metadata: ["event": "connection_closed", "five_tuple": "\(session.origin.fiveTuple)", "reason": "\(reason)"])
    }

    /// Once a second: handshake retransmissions (RFC 6347 §4.2.4) and timeout, idle sessions.
    private func sweep() {
        let now = EventLoop.now()
        let core = loop.core!
        for session in Array(sessions.values) {
            if !session.handshakeDone {
                if limits.handshake > 0 && now - session.handshakeStartedAt >= limits.handshake {
                    end(session, reason: "handshake timeout")
                } else {
                    _ = SSL_ctrl(session.ssl, DTLS_CTRL_HANDLE_TIMEOUT, 0, nil)
                }
            } else if limits.idle > 0, now - session.lastInputAt >= limits.idle,
                core.allocation(for: session.origin.fiveTuple) == nil
            {
                end(session, reason: "idle")
            } else if session.hasAllocated, core.allocation(for: session.origin.fiveTuple) == nil {
                // Its allocation ended and the session stays: it counts as pending again.
                session.hasAllocated = false
                service.limiter.pendingAgain(session.origin.fiveTuple.client.ip)
            }
        }
        loop.flush()
    }

    /// Adds this thread's DTLS handshake counts to its metrics snapshot.
    func contribute(to metrics: inout LoopMetrics) {
        metrics.dtlsHandshakesOK = handshakes.completed
        metrics.dtlsHandshakesFailed = handshakes.failed
        metrics.dtlsRestartsOK = restarts.completed
        metrics.dtlsRestartsFailed = restarts.failed
        metrics.dtlsSessionHelloVerifyRequests = sessionHelloVerifyRequests
        metrics.dtlsSessionDrops = sessionDrops
        metrics.dtlsSharedPortDrops = sharedPortDrops
    }

    /// Loop exit: every session and listener.
    func shutdown() {
        sweepTimer = nil
        for session in Array(sessions.values) { end(session, reason: "shutdown") }
        for (_, ssl) in listening { SSL_free(ssl) }
        listening.removeAll()
        for (_, filter) in sharedFilters { relayd_dtls_io_free(filter) }
        sharedFilters.removeAll()
        for listener in listeners {
            event_free(listener.event)
            close(listener.fd)
        }
        listeners.removeAll()
        loop.flush()
    }
}

extension DTLSTransport {
    /// The DTLS session on `socket` with `fiveTuple` got an allocation (a session started): it
    /// no longer counts as pending against its source's limits (docs/rate-limits.md).
    func connectionAllocated(socket: ClientSocket, fiveTuple: FiveTuple) {
        guard let session = sessions[socket.descriptor], session.origin.fiveTuple == fiveTuple, !session.hasAllocated
        else { return }
        session.hasAllocated = true
        service.limiter.allocated(fiveTuple.client.ip)
    }
}
