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
/// among them, read one message per record) and leave in one send(2) at the end of the loop
/// iteration, by whichever loop thread queued them: other loops queue relay-to-relay packets
/// here (their I/O layer executes the core's `deliverToStream` commands). The lock in `io`
/// guards the TLS session, the output queue and the state those threads look at; everything else
/// is the owning loop's alone.
///
/// This file holds the state and the lifecycle (deadlines, closing); the TLS session is in
/// `StreamConnection+TLS.swift`, the input framing in `StreamConnection+Framing.swift`, the output
/// queue in `StreamConnection+Output.swift`. Lock order: the connection's lock, then the
/// `event_base` lock (docs/architecture.md).
final class StreamConnection: StreamSink, @unchecked Sendable {
    enum State {
        /// Waiting for the first bytes, which say what the connection speaks (a port shared by
        /// TLS and TCP) or whose it is (a PROXY protocol header); `tls-handshake-timeout` runs
        /// (docs/tls.md, "One port for everything").
        case sniffing
        /// TLS handshake in progress (`tls-handshake-timeout` runs).
        case handshaking
        case open
        /// The client closed its side; answers already queued are still written (bounded in time).
        case draining
        case closed
    }

    let socket: Int32
    /// Set once, when a TLS handshake names a tenant's server name (docs/tenants.md).
    var origin: ClientOrigin
    /// The transport of the loop that owns the connection. A strong reference: other loops hold
    /// the connection (through the relayed-address directory) and compare owners, so the owner
    /// must outlive every such holder; the transport drops the connection when it closes.
    let owner: StreamTransport
    private(set) var state: State
    let acceptedAt: Int64
    /// When the connection could carry STUN: at accept for TCP, after the handshake for TLS.
    var readyAt: Int64
    var lastInputAt: Int64
    private(set) var drainingSince: Int64 = 0
    /// Why a draining connection closes once its output is written.
    private(set) var drainReason = StreamCloseReason.clientClosed
    /// True once a well-formed STUN message arrived; until then `tcp-idle-timeout` runs from `readyAt`.
    var sawValidStun = false
    /// True once a request on this connection created an allocation (it is no longer pending).
    var hasAllocated = false
    /// True once the TLS handshake completed (always for TCP).
    var handshakeDone: Bool
    /// Whether the connection holds a slot of the connection limits, under its origin's client
    /// address (false until a listed balancer's connection said whose it is).
    var holdsLimiterSlot = true
    /// Whether it holds a slot of the node's bounds only: a listed balancer's connection before
    /// its PROXY header said whose it is (`ConnectionLimiter.admitUnattributed`).
    var holdsUnattributedSlot = false
    /// Set when a PROXY header gave the connection its 5-tuple (`StreamTransport.proxiedTuples`).
    var proxied = false
    /// Set once an idle connection gave its buffers back, until its next input.
    var buffersReleased = false
    /// What the connection's first bytes may be, while `sniffing`.
    var opening = StreamOpening.Expected(tls: false, plain: false, proxyHeader: false)
    private(set) var closeReason: StreamCloseReason?
    /// The TLS session; nil for TCP, and once freed (also once `records` took over after the
    /// handshake).
    var ssl: OpaquePointer?
    /// The TLS 1.3 records of a session whose handshake is done, kept by relayd instead of
    /// OpenSSL (`CStreamIO`, docs/tls.md, "After the handshake"); nil otherwise.
    var records: OpaquePointer?
    /// The protocol ALPN chose in the handshake was `http/1.1` (nil: none was chosen).
    var alpnIsHTTP: Bool?
    /// Bytes between the socket and OpenSSL (fixed address: the BIO points at it).
    let io: UnsafeMutablePointer<relayd_stream_io>
    /// The start of a frame cut off by the end of a read, waiting for its rest.
    var partial = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    var partialCount = 0
    var readEvent: OpaquePointer?
    var writeEvent: OpaquePointer?
    /// True while the write event is added (the socket took less than was queued).
    var waitingForSocket = false
    /// True while the connection is on some loop's list of sockets to write at the end of its
    /// iteration (that loop writes everything queued by then).
    var awaitingWrite = false
    /// Set when queuing failed or passed the output bound: later packets are refused, and the
    /// owning loop closes the connection for this reason (at once, or at its next sweep when
    /// another loop found it).
    var refusal: (reason: StreamCloseReason, detail: String)?
    /// The peer connection this data connection carries after its ConnectionBind (RFC 6062
    /// §5.4); nil for a control connection.
    var pipe: TCPPipe?
    /// Set, under the lock, while a live upgrade hands the connection to another process: this
    /// process then writes nothing more to it and queues nothing (docs/live-upgrade.md).
    var handingOver = false

    /// A frame is at most a STUN header plus a 16-bit length (ChannelData: 4 + 65535 + padding).
    static let maxFrameLength = StunConstants.headerLength + 65536
    /// Queued output beyond `StreamTransport.maxOutputBytes` closes the connection; the queue
    /// itself refuses appends only past this (one more message and its TLS record overhead).
    static let outputLimit = StreamTransport.maxOutputBytes + maxFrameLength + 1024

    /// Takes `socket` (non-blocking) and `ssl` (nil for TCP, and for a connection whose first
    /// bytes decide, `sniffing` what `opening` allows); nil when OpenSSL has no memory for the
    /// BIO. The caller closes the socket and frees `ssl` then.
    init?(
        socket: Int32, ssl: OpaquePointer?, origin: ClientOrigin, owner: StreamTransport, now: Int64,
        opening: StreamOpening.Expected? = nil
    ) {
        io = UnsafeMutablePointer<relayd_stream_io>.allocate(capacity: 1)
        relayd_stream_io_init(io, StreamConnection.outputLimit)
        if let ssl, !Self.attach(ssl, to: io) {
            relayd_stream_io_destroy(io)
            io.deallocate()
            return nil
        }
        self.socket = socket
        self.ssl = ssl
        self.origin = origin
        self.owner = owner
        state = opening != nil ? .sniffing : ssl != nil ? .handshaking : .open
        if let opening { self.opening = opening }
        handshakeDone = ssl == nil
        acceptedAt = now
        readyAt = now
        lastInputAt = now
    }

    /// Puts `ssl` over the connection's memory BIO, as the accepting side; false when OpenSSL
    /// has no memory for the BIO.
    static func attach(_ ssl: OpaquePointer, to io: UnsafeMutablePointer<relayd_stream_io>) -> Bool {
        guard let bio = relayd_stream_io_bio(io) else { return false }
        SSL_set_bio(ssl, bio, bio)
        SSL_set_accept_state(ssl)
        // A session whose records relayd may take over after the handshake reads no further
        // than the handshake's last record: what follows stays for relayd's records.
        SSL_set_read_ahead(ssl, TLSContext.capturesSecrets(ssl) ? 0 : 1)
        return true
    }

    /// Whether the connection speaks TLS (through OpenSSL or its own records).
    var isTLS: Bool { ssl != nil || records != nil }

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
            let connection = Unmanaged<StreamConnection>.fromOpaque(arg!).takeUnretainedValue()
            if let pipe = connection.pipe, let splice = pipe.splice { return connection.spliceEvent(pipe, splice) }
            connection.writeNow(onOwner: true)
        }, me)
        guard readEvent != nil, writeEvent != nil else { return close(.error, detail: "cannot register the socket") }
        event_add(readEvent, nil)
    }

    // MARK: State

    /// Changes `state` under the connection's lock. Other loops read it there (`enqueue`); the
    /// owning loop, its only writer, reads it without the lock and writes it only here.
    func transition(to next: State) {
        relayd_stream_io_lock(io)
        state = next
        relayd_stream_io_unlock(io)
    }

    /// End of the client's stream: write what is still queued, then close.
    func clientClosed(reason: StreamCloseReason = .clientClosed) {
        guard state == .open || state == .handshaking || state == .sniffing else { return }
        if state != .open || pendingOutput == 0 {
            return close(reason)
        }
        drainReason = reason
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
        if state == .open, !buffersReleased, now - lastInputAt >= Self.idleBufferSeconds { releaseIdleBuffers() }
        switch state {
        case .sniffing:
            // Bounded by tls-handshake-timeout, or by tcp-idle-timeout where that is 0.
            let bound = limits.handshake > 0 ? limits.handshake : limits.idle
            if bound > 0, now - acceptedAt >= bound { close(.openingTimeout) }
        case .handshaking:
            if limits.handshake > 0, now - acceptedAt >= limits.handshake { close(.tlsHandshakeTimeout) }
        case .open:
            // A data connection's pipe lives as long as its allocation (RFC 6062 §5.5).
            guard limits.idle > 0, pipe == nil else { return }
            if !sawValidStun {
                if now - readyAt >= limits.idle { close(.idleTimeout, detail: "no STUN message") }
            } else if now - lastInputAt >= limits.idle, !hasAllocation(origin) {
                close(.idleTimeout, detail: "idle without an allocation")
            }
        case .draining:
            if pendingOutput == 0 || now - drainingSince >= StreamTransport.drainSeconds { close(drainReason) }
        case .closed:
            break
        }
    }

    /// Seconds without input after which a connection gives back its buffers (`releaseIdleBuffers`).
    static let idleBufferSeconds: Int64 = 2

    /// An idle connection's memory back to the allocator: OpenSSL's record buffers (16 KiB to
    /// read, which OpenSSL keeps after its last read that found nothing, even with
    /// `SSL_MODE_RELEASE_BUFFERS`), an empty output queue, an empty part-frame buffer. Most
    /// `turns:` allocations sit idle between a call's keep-alives, and this is most of what an
    /// idle TLS allocation costs (docs/benchmark.md). From the sweep only, never per packet: a
    /// busy connection keeps its buffers.
    func releaseIdleBuffers() {
        buffersReleased = true
        relayd_stream_io_lock(io)
        var freed = false
        if let ssl, !handingOver, TLSContext.mayFreeBuffers { freed = SSL_free_buffers(ssl) == 1 }
        if let records, relayd_tls_records_release_buffers(records) == 1 { freed = true }
        if relayd_stream_io_pending(io) == 0, io.pointee.output_capacity > 0 {
            relayd_stream_io_release(io)
            freed = true
        }
        relayd_stream_io_unlock(io)
        if freed { owner.buffersReleased += 1 }
        if partialCount == 0, partial.count > 0 {
            partial.deallocate()
            partial = UnsafeMutableRawBufferPointer(start: nil, count: 0)
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
        freeEvents()
        if closeReason == .slowReader {
            var abort = linger(l_onoff: 1, l_linger: 0)
            setsockopt(socket, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
        } else {
            if handshakeDone, closeReason != .error {
                ERR_clear_error()
                if let records {
                    _ = relayd_tls_records_close_notify(records, io)
                } else if let ssl {
                    SSL_shutdown(ssl)
                }
            }
            // A connection a live upgrade paused leaves its output to the heir, which has it.
            if !handingOver { _ = relayd_stream_io_flush(io, socket) }
        }
        if let ssl { SSL_free(ssl) }
        ssl = nil
        if let records { relayd_tls_records_free(records) }
        records = nil
        releaseBuffersAndClose()
    }

    /// The socket's events, freed (under the lock, from `free` or `abandon`).
    func freeEvents() {
        if let readEvent { event_free(readEvent) }
        if let writeEvent { event_free(writeEvent) }
        readEvent = nil
        writeEvent = nil
    }

    /// The output queue and the part frame freed, and the socket closed (under the lock, last).
    func releaseBuffersAndClose() {
        relayd_stream_io_release(io)
        partial.deallocate()
        partial = UnsafeMutableRawBufferPointer(start: nil, count: 0)
        partialCount = 0
        Glibc.close(socket)
    }
}
