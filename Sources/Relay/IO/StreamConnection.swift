import CLibevent
import CStreamWrite
import COpenSSL
import Glibc
import Logging
import StunCodec

/// One TCP or TLS client connection on its loop thread: a libevent bufferevent (plain socket, or
/// OpenSSL accepting), its framing of the byte stream into STUN messages and ChannelData
/// (RFC 8489 §6.2.2, RFC 8656 §12.5), and its abuse deadlines. Protocol work stays in `RelayCore`.
final class StreamConnection {
    enum State {
        /// TLS handshake in progress (`tls-handshake-timeout` runs).
        case handshaking
        case open
        /// The client closed its side; answers already queued are still written (bounded in time).
        case draining
        case closed
    }

    let bufferEvent: OpaquePointer
    let origin: ClientOrigin
    unowned let owner: StreamTransport
    private(set) var state: State
    let acceptedAt: Int64
    /// When the connection could carry STUN: at accept for TCP, after the handshake for TLS.
    private(set) var readyAt: Int64
    private(set) var lastInputAt: Int64
    private(set) var drainingSince: Int64 = 0
    /// True once a well-formed STUN message arrived; until then `tcp-idle-timeout` runs from `readyAt`.
    private(set) var sawValidStun = false
    /// True once the TLS handshake completed (always for TCP).
    private(set) var handshakeDone: Bool
    private(set) var closeReason: StreamCloseReason?
    /// True while the connection is on the transport's list of sockets to write at the end of
    /// this loop iteration.
    private var awaitingWrite = false

    /// A frame is at most a STUN header plus a 16-bit length (ChannelData: 4 + 65535 + padding).
    static let maxFrameLength = StunConstants.headerLength + 65536

    init(bufferEvent: OpaquePointer, origin: ClientOrigin, owner: StreamTransport, now: Int64) {
        self.bufferEvent = bufferEvent
        self.origin = origin
        self.owner = owner
        state = origin.fiveTuple.transport == .tls ? .handshaking : .open
        handshakeDone = origin.fiveTuple.transport != .tls
        acceptedAt = now
        readyAt = now
        lastInputAt = now
    }

    var transport: TransportProtocol { origin.fiveTuple.transport }

    /// Installs the callbacks and starts reading (for TLS: the handshake).
    func start() {
        if transport == .tls { bufferevent_openssl_set_allow_dirty_shutdown(bufferEvent, 1) }
        bufferevent_setcb(
            bufferEvent,
            { _, arg in Unmanaged<StreamConnection>.fromOpaque(arg!).takeUnretainedValue().readable() },
            { _, arg in Unmanaged<StreamConnection>.fromOpaque(arg!).takeUnretainedValue().drained() },
            { _, events, arg in Unmanaged<StreamConnection>.fromOpaque(arg!).takeUnretainedValue().event(events) },
            Unmanaged.passUnretained(self).toOpaque())
        bufferevent_enable(bufferEvent, Int16(EV_READ | EV_WRITE))
    }

    // MARK: Input

    /// Frames everything received so far and hands each whole frame to the core. Frames are
    /// drained from the input only after the outbox is flushed: relayed payloads are sent
    /// straight from these bytes.
    private func readable() {
        // libevent's TLS filter hands over data that came with the client's last handshake
        // flight before it reports the handshake as completed.
        if state == .handshaking { handshakeCompleted() }
        guard state == .open else { return }
        let input = bufferevent_get_input(bufferEvent)
        let loop = owner.loop
        let now = EventLoop.now()
        lastInputAt = now
        while state == .open {
            let available = evbuffer_get_length(input)
            guard available > 0 else { break }
            let window = min(available, StreamConnection.maxFrameLength)
            guard let head = evbuffer_pullup(input, window) else { break }
            let bytes = UnsafeRawBufferPointer(start: head, count: window)
            var consumed = 0
            while state == .open {
                let rest = UnsafeRawBufferPointer(rebasing: bytes[consumed...])
                let frame: StreamFramer.Frame?
                do {
                    frame = try StreamFramer.nextFrame(in: rest)
                } catch {
                    loop.core.counters.drop(.malformed)
                    close(.badFrame, detail: "\(error)")
                    break
                }
                guard let frame else { break }
                let message = UnsafeRawBufferPointer(rebasing: rest[..<frame.length])
                if !sawValidStun, frame.kind == .stun, (try? StunMessage(parsing: message)) != nil {
                    sawValidStun = true
                }
                loop.core.handleClientPacket(message, from: origin, now: now)
                consumed += frame.length
                if loop.core.outbox.needsFlush { loop.flush() }
            }
            loop.flush()
            evbuffer_drain(input, consumed)
            if consumed == 0 { break }
        }
    }

    // MARK: Output

    /// Queues a response or relayed packet; libevent writes everything queued during this loop
    /// iteration in one writev. Over TLS each message is its own chunk of the output and so its
    /// own TLS record (OpenSSL is handed one chunk per SSL_write), as coturn does: some clients,
    /// turnutils_uclient among them, read one message per record. A client that lets more than
    /// `StreamTransport.maxOutputBytes` pile up is disconnected.
    @inline(__always)
    func write(_ bytes: UnsafeRawBufferPointer) {
        guard state == .open || state == .draining, let base = bytes.baseAddress else { return }
        let output = bufferevent_get_output(bufferEvent)!
        let queued: Bool
        if transport == .tls {
            let staging = owner.recordStaging
            queued = evbuffer_add(staging, base, bytes.count) == 0 && evbuffer_add_buffer(output, staging) == 0
            evbuffer_drain(staging, evbuffer_get_length(staging))
        } else {
            queued = evbuffer_add(output, base, bytes.count) == 0
        }
        guard queued else {
            close(.error, detail: "cannot queue output")
            return
        }
        let pending = pendingOutput
        if pending > StreamTransport.maxOutputBytes {
            close(.slowReader, detail: "\(pending) bytes unread")
        } else if !awaitingWrite {
            awaitingWrite = true
            owner.noteUnflushed(self)
        }
    }

    /// Hands the socket what is queued (over TLS: the records encrypted so far) in one writev
    /// now, rather than after libevent's next epoll round reports the socket writable; what the
    /// socket does not take is left to libevent's write event.
    func writeNow() {
        awaitingWrite = false
        guard state == .open || state == .draining else { return }
        let socketEvent = transport == .tls ? bufferevent_get_underlying(bufferEvent) : bufferEvent
        if let socketEvent { _ = relayd_bufferevent_write_now(socketEvent) }
    }

    /// Bytes queued and not yet taken by the kernel: plaintext plus, over TLS, ciphertext.
    var pendingOutput: Int {
        var total = evbuffer_get_length(bufferevent_get_output(bufferEvent))
        if let socketEvent = bufferevent_get_underlying(bufferEvent) {
            total += evbuffer_get_length(bufferevent_get_output(socketEvent))
        }
        return total
    }

    /// The output buffer ran empty: a draining connection is done (over TLS once the ciphertext
    /// has left too; the sweep looks again).
    private func drained() {
        if state == .draining, pendingOutput == 0 { close(.clientClosed) }
    }

    // MARK: Events

    private func event(_ events: Int16) {
        let events = Int32(events)
        if events & BEV_EVENT_CONNECTED != 0 {
            handshakeCompleted()
            if evbuffer_get_length(bufferevent_get_input(bufferEvent)) > 0 { readable() }
        }
        if events & BEV_EVENT_ERROR != 0 {
            let wasHandshaking = state == .handshaking
            close(wasHandshaking ? .tlsHandshakeFailed : .error, detail: errorDetail())
        } else if events & BEV_EVENT_EOF != 0 {
            clientClosed()
        }
    }

    private func handshakeCompleted() {
        guard state == .handshaking else { return }
        state = .open
        handshakeDone = true
        owner.handshakeCompleted()
        readyAt = EventLoop.now()
        lastInputAt = readyAt
        guard owner.logger.logLevel <= .debug, let ssl = bufferevent_openssl_get_ssl(bufferEvent) else { return }
        let sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { LogSafe.text(String(cString: $0)) }
        var alpn: UnsafePointer<UInt8>? = nil
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &alpn, &alpnLength)
        let protocolID = alpn.map {
            String(decoding: UnsafeBufferPointer(start: $0, count: Int(alpnLength)), as: UTF8.self)
        }
        let cipher = SSL_get_current_cipher(ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) }
        owner.logger.debug(
            "TLS handshake completed",
            metadata: [
                "event": "tls_handshake", "five_tuple": "\(origin.fiveTuple)", "sni": "\(sni ?? "-")",
                "alpn": "\(protocolID ?? "-")", "version": "\(String(cString: SSL_get_version(ssl)))",
                "cipher": "\(cipher ?? "-")",
            ])
    }

    /// End of the client's stream: write what is still queued, then close.
    private func clientClosed() {
        guard state == .open || state == .handshaking else { return }
        if state == .handshaking || pendingOutput == 0 {
            close(.clientClosed)
            return
        }
        state = .draining
        drainingSince = EventLoop.now()
        bufferevent_disable(bufferEvent, Int16(EV_READ))
    }

    /// OpenSSL's reason or the socket error, for the debug log.
    private func errorDetail() -> String {
        if transport == .tls {
            var reasons: [String] = []
            while true {
                let code = bufferevent_get_openssl_error(bufferEvent)
                if code == 0 { break }
                reasons.append(TLSContext.describe(code))
            }
            if !reasons.isEmpty { return reasons.joined(separator: "; ") }
        }
        let error = errno
        return error == 0 ? "-" : String(cString: strerror(error))
    }

    // MARK: Deadlines and closing

    /// Applies the abuse deadlines; called about once a second by the transport's sweep.
    func checkDeadlines(now: Int64, hasAllocation: (ClientOrigin) -> Bool) {
        let limits = owner.limits
        switch state {
        case .handshaking:
            if limits.handshake > 0, now - acceptedAt >= limits.handshake { close(.tlsHandshakeTimeout) }
        case .open:
            guard limits.idle > 0 else { return }
            if !sawValidStun {
                if now - readyAt >= limits.idle { close(.idleTimeout, detail: "no STUN message") }
            } else if now - lastInputAt >= limits.idle, !hasAllocation(origin) {
                close(.idleTimeout, detail: "idle without an allocation")
            }
        case .draining:
            if pendingOutput == 0 || now - drainingSince >= StreamTransport.drainSeconds { close(.clientClosed) }
        case .closed:
            break
        }
    }

    /// Stops all I/O at once; the transport frees the connection (and ends its allocation) in
    /// the next loop iteration, so nothing in flight on the stack ever sees it freed and the
    /// descriptor is not reused while packets for it may still be queued.
    func close(_ reason: StreamCloseReason, detail: String? = nil) {
        guard state != .closed else { return }
        state = .closed
        closeReason = reason
        bufferevent_disable(bufferEvent, Int16(EV_READ | EV_WRITE))
        bufferevent_setcb(bufferEvent, nil, nil, nil, nil)
        owner.scheduleRelease(self, detail: detail)
    }
}
