import RelayCore
import CLibevent
import COpenSSL
import CStreamIO
import Glibc
import Logging
import StunCodec

/// One TCP or TLS client connection on its loop thread: its socket's read and write events,
/// for TLS its OpenSSL session (over a memory BIO, `CStreamIO`), its framing of the byte stream
/// into STUN messages and ChannelData (RFC 8489 §6.2.2, RFC 8656 §12.5), and its abuse
/// deadlines. Protocol work stays in `RelayCore`.
///
/// Reading: one read(2) per readable event into the loop's buffer; TLS hands that ciphertext to
/// OpenSSL from memory and decrypts it into the loop's frame buffer. Writing: answers and relayed
/// packets are queued (TLS: each its own record, as coturn does: some clients, turnutils_uclient
/// among them, read one message per record) and leave in one write(2) at the end of the loop
/// iteration, by whichever loop thread queued them: other loops queue relay-to-relay packets
/// here directly (`StreamSink`). The lock in `io` guards the TLS session, the output
/// queue and the state those threads look at; everything else is the owning loop's alone.
final class StreamConnection: StreamSink, @unchecked Sendable {
    enum State {
        /// TLS handshake in progress (`tls-handshake-timeout` runs).
        case handshaking
        case open
        /// The client closed its side; answers already queued are still written (bounded in time).
        case draining
        case closed
    }

    let socket: Int32
    let origin: ClientOrigin
    /// The transport of the loop that owns the connection. A strong reference: other loops hold
    /// the connection (through the relayed-address directory) and compare owners, so the owner
    /// must outlive every such holder; the transport drops the connection when it closes.
    let owner: StreamTransport
    private(set) var state: State
    let acceptedAt: Int64
    /// When the connection could carry STUN: at accept for TCP, after the handshake for TLS.
    private(set) var readyAt: Int64
    private(set) var lastInputAt: Int64
    private(set) var drainingSince: Int64 = 0
    /// True once a well-formed STUN message arrived; until then `tcp-idle-timeout` runs from `readyAt`.
    private(set) var sawValidStun = false
    /// True once a request on this connection created an allocation (it is no longer pending).
    private(set) var hasAllocated = false
    /// True once the TLS handshake completed (always for TCP).
    private(set) var handshakeDone: Bool
    private(set) var closeReason: StreamCloseReason?
    /// The TLS session; nil for TCP, and once freed.
    private var ssl: OpaquePointer?
    /// Bytes between the socket and OpenSSL (fixed address: the BIO points at it).
    private let io: UnsafeMutablePointer<relayd_stream_io>
    /// The start of a frame cut off by the end of a read, waiting for its rest.
    private var partial = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    private var partialCount = 0
    private var readEvent: OpaquePointer?
    private var writeEvent: OpaquePointer?
    /// True while the write event is added (the socket took less than was queued).
    private var waitingForSocket = false
    /// True while the connection is on some loop's list of sockets to write at the end of its
    /// iteration (that loop writes everything queued by then).
    private var awaitingWrite = false
    /// Set when queuing failed or passed the output bound: later packets are refused, and the
    /// owning loop closes the connection for this reason (at once, or at its next sweep when
    /// another loop found it).
    private var refusal: (reason: StreamCloseReason, detail: String)?

    /// A frame is at most a STUN header plus a 16-bit length (ChannelData: 4 + 65535 + padding).
    static let maxFrameLength = StunConstants.headerLength + 65536
    /// Queued output beyond `StreamTransport.maxOutputBytes` closes the connection; the queue
    /// itself refuses appends only past this (one more message and its TLS record overhead).
    static let outputLimit = StreamTransport.maxOutputBytes + maxFrameLength + 1024

    /// Takes `socket` (non-blocking) and `ssl` (nil for TCP); nil when OpenSSL has no memory for
    /// the BIO. The caller closes the socket and frees `ssl` then.
    init?(socket: Int32, ssl: OpaquePointer?, origin: ClientOrigin, owner: StreamTransport, now: Int64) {
        io = UnsafeMutablePointer<relayd_stream_io>.allocate(capacity: 1)
        relayd_stream_io_init(io, StreamConnection.outputLimit)
        if let ssl {
            guard let bio = relayd_stream_io_bio(io) else {
                relayd_stream_io_destroy(io)
                io.deallocate()
                return nil
            }
            SSL_set_bio(ssl, bio, bio)
            SSL_set_accept_state(ssl)
            SSL_set_read_ahead(ssl, 1)
        }
        self.socket = socket
        self.ssl = ssl
        self.origin = origin
        self.owner = owner
        state = ssl != nil ? .handshaking : .open
        handshakeDone = ssl == nil
        acceptedAt = now
        readyAt = now
        lastInputAt = now
    }

    deinit {
        relayd_stream_io_destroy(io)
        io.deallocate()
    }

    var transport: TransportProtocol { origin.fiveTuple.transport }

    /// Registers the socket's events and starts reading (for TLS: the handshake).
    func start(base: OpaquePointer) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        readEvent = event_new(base, socket, Int16(EV_READ | EV_PERSIST), { _, _, arg in
            Unmanaged<StreamConnection>.fromOpaque(arg!).takeUnretainedValue().readable()
        }, me)
        writeEvent = event_new(base, socket, Int16(EV_WRITE | EV_PERSIST), { _, _, arg in
            Unmanaged<StreamConnection>.fromOpaque(arg!).takeUnretainedValue().writeNow(onOwner: true)
        }, me)
        guard readEvent != nil, writeEvent != nil else { return close(.error, detail: "cannot register the socket") }
        event_add(readEvent, nil)
    }

    // MARK: Input

    /// One read(2) of what the socket holds; for TLS, the handshake or decryption of it; then
    /// every whole frame to the core.
    private func readable() {
        guard state == .open || state == .handshaking else { return }
        let buffer = ssl == nil ? owner.frameBuffer : owner.cipherBuffer
        // TCP reads behind the kept part frame, which is copied in front once the read succeeded.
        let offset = ssl == nil ? partialCount : 0
        let count = Glibc.read(socket, buffer.baseAddress! + offset, buffer.count - offset)
        if count <= 0 {
            if count < 0 {
                let error = errno
                if error == EAGAIN || error == EWOULDBLOCK || error == EINTR { return }
                return close(.error, detail: String(cString: strerror(error)))
            }
            return clientClosed()
        }
        lastInputAt = EventLoop.now()
        if let ssl {
            decrypt(ssl, UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            scheduleWrite()  // what OpenSSL wrote itself: a handshake flight, session tickets
        } else {
            _ = restorePartial(into: owner.frameBuffer)
            deliverFrames(in: owner.frameBuffer, count: offset + count)
        }
    }

    /// Feeds `ciphertext` to OpenSSL: the handshake first, then records decrypted into the frame
    /// buffer (behind any partial frame) and delivered, also when the buffer fills up.
    /// Each OpenSSL call holds the lock (another loop may be writing records); the frames are
    /// delivered without it (answers to them are queued under it).
    private func decrypt(_ ssl: OpaquePointer, _ ciphertext: UnsafeRawBufferPointer) {
        io.pointee.input = ciphertext.baseAddress!.assumingMemoryBound(to: UInt8.self)
        io.pointee.input_length = ciphertext.count
        defer {
            io.pointee.input = nil
            io.pointee.input_length = 0
        }
        if state == .handshaking {
            relayd_stream_io_lock(io)
            ERR_clear_error()
            let result = SSL_do_handshake(ssl)
            let error = result == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl, result)
            let waiting = error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE
            let detail = result == 1 || waiting ? nil : tlsErrorDetail(error)
            relayd_stream_io_unlock(io)
            if let detail { return close(.tlsHandshakeFailed, detail: detail) }
            guard result == 1 else { return }
            handshakeCompleted()
        }
        let frames = owner.frameBuffer
        var count = restorePartial(into: frames)
        while state == .open {
            if count == frames.count {
                deliverFrames(in: frames, count: count)
                count = restorePartial(into: frames)
                continue
            }
            relayd_stream_io_lock(io)
            ERR_clear_error()
            let space = Int32(clamping: frames.count - count)
            let result = SSL_read(ssl, frames.baseAddress! + count, space)
            let error = result > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl, result)
            let waiting = error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE
            let failed = result <= 0 && !waiting && error != SSL_ERROR_ZERO_RETURN
            let detail = failed ? tlsErrorDetail(error) : nil
            relayd_stream_io_unlock(io)
            if result > 0 {
                count += Int(result)
                continue
            }
            if waiting { break }
            deliverFrames(in: frames, count: count)
            count = 0
            if let detail {
                close(.error, detail: detail)
            } else {
                clientClosed()  // close_notify
            }
            return
        }
        if state == .open { deliverFrames(in: frames, count: count) }
    }

    /// Hands each whole frame in `buffer[..<count]` to the core, writes what it queued (relayed
    /// payloads are sent straight from these bytes), and keeps a trailing part frame.
    private func deliverFrames(in buffer: UnsafeMutableRawBufferPointer, count: Int) {
        let loop = owner.loop
        let now = EventLoop.now()
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<count])
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
            if !hasAllocated, frame.kind == .stun, loop.core.allocation(for: origin.fiveTuple) != nil {
                hasAllocated = true
                owner.connectionAllocated(self)
            }
            consumed += frame.length
            if loop.core.outbox.needsFlush { loop.flush() }
        }
        loop.flush()
        if state == .open { keepPartial(UnsafeRawBufferPointer(rebasing: bytes[consumed...])) }
    }

    /// Moves the kept part frame to the start of `buffer`; returns its length.
    private func restorePartial(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard partialCount > 0, let source = partial.baseAddress else { return 0 }
        let count = partialCount
        buffer.baseAddress!.copyMemory(from: source, byteCount: count)
        partialCount = 0
        return count
    }

    /// Keeps `bytes` (less than a frame) until the next read; the storage grows as needed and
    /// stays with the connection.
    private func keepPartial(_ bytes: UnsafeRawBufferPointer) {
        partialCount = bytes.count
        guard bytes.count > 0 else { return }
        if partial.count < bytes.count {
            let capacity = min(StreamConnection.maxFrameLength, max(256, bytes.count, partial.count * 2))
            partial.deallocate()
            partial = .allocate(byteCount: capacity, alignment: 8)
        }
        partial.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
    }

    // MARK: Output

    /// What queuing a packet did.
    enum Queued {
        /// Queued; `schedule`: the caller's loop writes the socket at the end of its iteration.
        case queued(schedule: Bool)
        /// The connection is closing or refusing packets: dropped.
        case refused
    }

    /// Queues a framed packet (over TLS as one record), from any loop thread. Passing
    /// `StreamTransport.maxOutputBytes`, or a failure to queue, makes the connection refuse
    /// further packets until its owner closes it.
    func enqueue(_ bytes: UnsafeRawBufferPointer) -> Queued {
        guard let base = bytes.baseAddress else { return .refused }
        relayd_stream_io_lock(io)
        defer { relayd_stream_io_unlock(io) }
        guard state == .open || state == .draining, refusal == nil else { return .refused }
        let queued: Bool
        if let ssl {
            ERR_clear_error()
            queued = SSL_write(ssl, base, Int32(bytes.count)) == Int32(bytes.count)
        } else {
            queued = relayd_stream_io_append(io, base, bytes.count) == 0
        }
        let pending = relayd_stream_io_pending(io)
        if !queued {
            refusal = (.error, "cannot queue output")
            return .refused
        }
        if pending > StreamTransport.maxOutputBytes {
            refusal = (.slowReader, "\(pending) bytes unread")
            return .refused
        }
        guard !awaitingWrite, !waitingForSocket else { return .queued(schedule: false) }
        awaitingWrite = true
        return .queued(schedule: true)
    }

    /// Owning loop: closes the connection if queuing made it refuse packets.
    func closeIfRefusing() {
        relayd_stream_io_lock(io)
        let found = refusal
        relayd_stream_io_unlock(io)
        if let found { close(found.reason, detail: found.detail) }
    }

    /// Owning loop: puts the connection on its transport's end-of-iteration write list if it
    /// has output (a TLS handshake flight, say).
    private func scheduleWrite() {
        relayd_stream_io_lock(io)
        let schedule = !awaitingWrite && !waitingForSocket && relayd_stream_io_pending(io) > 0
        if schedule { awaitingWrite = true }
        relayd_stream_io_unlock(io)
        if schedule { owner.noteUnflushed(self) }
    }

    /// Hands the socket what is queued in one write(2), from whichever loop put the connection
    /// on its write list (or the write event); what the socket does not take waits for the
    /// write event. Closing on a socket error or after draining is the owning loop's: another
    /// loop leaves both to it (its read event or sweep).
    func writeNow(onOwner: Bool) {
        relayd_stream_io_lock(io)
        awaitingWrite = false
        guard state != .closed else { return relayd_stream_io_unlock(io) }
        var failure: String? = nil
        if relayd_stream_io_flush(io, socket) < 0 {
            let error = errno
            if error != EAGAIN && error != EWOULDBLOCK { failure = String(cString: strerror(error)) }
        }
        let left = relayd_stream_io_pending(io) > 0
        if failure == nil, left != waitingForSocket {
            waitingForSocket = left
            // Not event_del: from another thread it waits for a running callback of the event,
            // which may be the owner's write callback waiting for this lock.
            if left { event_add(writeEvent, nil) } else { event_del_noblock(writeEvent) }
        }
        if let failure, refusal == nil { refusal = (.error, failure) }
        let drained = !left && state == .draining
        relayd_stream_io_unlock(io)
        guard onOwner else { return }
        if failure != nil {
            closeIfRefusing()
        } else if drained {
            close(.clientClosed)
        }
    }

    /// Bytes queued and not yet taken by the kernel (TLS: ciphertext).
    var pendingOutput: Int {
        relayd_stream_io_lock(io)
        defer { relayd_stream_io_unlock(io) }
        return relayd_stream_io_pending(io)
    }

    // MARK: Handshake and errors

    /// Changes `state` under the connection's lock. Other loops read it there (`enqueue`); the
    /// owning loop, its only writer, reads it without the lock and writes it only here.
    private func transition(to next: State) {
        relayd_stream_io_lock(io)
        state = next
        relayd_stream_io_unlock(io)
    }

    private func handshakeCompleted() {
        guard state == .handshaking else { return }
        transition(to: .open)
        handshakeDone = true
        owner.handshakeCompleted()
        readyAt = EventLoop.now()
        lastInputAt = readyAt
        guard owner.logger.logLevel <= .debug, let ssl else { return }
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

    /// OpenSSL's reasons for the failed call (this thread's error queue), or the socket error.
    private func tlsErrorDetail(_ error: Int32) -> String {
        if ERR_peek_error() != 0 { return TLSContext.drainErrors() }
        if error == SSL_ERROR_SYSCALL, errno != 0 { return String(cString: strerror(errno)) }
        return "SSL error \(error)"
    }

    /// End of the client's stream: write what is still queued, then close.
    private func clientClosed() {
        guard state == .open || state == .handshaking else { return }
        if state == .handshaking || pendingOutput == 0 {
            return close(.clientClosed)
        }
        transition(to: .draining)
        drainingSince = EventLoop.now()
        event_del(readEvent)
        scheduleWrite()
    }

    // MARK: Deadlines and closing

    /// Applies the abuse deadlines, and closes a connection another loop found refusing;
    /// called about once a second by the transport's sweep.
    func checkDeadlines(now: Int64, hasAllocation: (ClientOrigin) -> Bool) {
        closeIfRefusing()
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
        transition(to: .closed)
        closeReason = reason
        if let readEvent { event_del(readEvent) }
        if let writeEvent { event_del(writeEvent) }
        owner.scheduleRelease(self, detail: detail)
    }

    /// Frees everything and closes the socket (the transport's release, once). A slow reader's
    /// connection is reset so the kernel drops what it left unread; otherwise a TLS session that
    /// got through its handshake says close_notify, and what is already queued (a TLS alert that
    /// says why a handshake was refused, say) gets one last non-blocking write.
    func free() {
        relayd_stream_io_lock(io)
        defer { relayd_stream_io_unlock(io) }
        if let readEvent { event_free(readEvent) }
        if let writeEvent { event_free(writeEvent) }
        readEvent = nil
        writeEvent = nil
        if closeReason == .slowReader {
            var abort = linger(l_onoff: 1, l_linger: 0)
            setsockopt(socket, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
        } else {
            if let ssl, handshakeDone, closeReason != .error {
                ERR_clear_error()
                SSL_shutdown(ssl)
            }
            _ = relayd_stream_io_flush(io, socket)
        }
        if let ssl { SSL_free(ssl) }
        ssl = nil
        relayd_stream_io_release(io)
        partial.deallocate()
        partial = UnsafeMutableRawBufferPointer(start: nil, count: 0)
        Glibc.close(socket)
    }
}
