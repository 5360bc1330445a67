import COpenSSL
import Glibc
import StunCodec

/// TLS handshakes against a server's TLS port (`--handshakes S`): `--concurrency` connections at
/// a time, each closed as soon as its handshake is done and replaced by a new one, for S seconds.
/// Full handshakes by default; with `--resume`, every connection offers the session a first
/// full handshake left (TLS 1.3: a PSK from the server's NewSessionTicket, RFC 8446 §4.6.1; TLS
/// 1.2 with `--tls12`: an RFC 5077 ticket), and the run counts how many the server resumed.
/// The server's CPU per handshake (`--server-pid`) is what a fleet pays for its clients'
/// reconnects; the rate depends on this one-threaded client too.
enum HandshakeBench {
    struct Result {
        var completed = 0
        var resumed = 0
        var failed = 0
        var seconds = 0.0
        var serverCPU: Double?
    }

    /// One connection in flight.
    private struct Slot {
        var fd: Int32 = -1
        var ssl: OpaquePointer?
    }

    static func run(_ options: BenchOptions) -> Result {
        guard let context = SSL_CTX_new(TLS_client_method()) else { return Result(failed: 1) }
        defer { SSL_CTX_free(context) }
        SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        if options.tls12 { SSL_CTX_ctrl(context, SSL_CTRL_SET_MAX_PROTO_VERSION, Int(TLS1_2_VERSION), nil) }
        SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        let session: OpaquePointer? = options.resume ? seedSession(context, server: options.server) : nil
        defer { if let session { SSL_SESSION_free(session) } }
        if options.resume && session == nil { return Result(failed: 1) }

        var result = Result()
        var slots = [Slot](repeating: Slot(), count: max(1, options.concurrency))
        var fds = [pollfd](repeating: pollfd(fd: -1, events: 0, revents: 0), count: slots.count)
        let cpuBefore = options.serverPID > 0 ? ProcessCPU.seconds(pid: options.serverPID) : nil
        let start = Clock.now()
        let end = start + UInt64(options.handshakeSeconds * 1e9)
        while Clock.now() < end {
            for i in slots.indices where slots[i].ssl == nil {
                slots[i] = open(context, server: options.server, session: session) ?? Slot()
                if slots[i].ssl == nil { result.failed += 1 }
            }
            for i in slots.indices {
                fds[i] = pollfd(fd: slots[i].fd, events: Int16(POLLIN | POLLOUT), revents: 0)
            }
            _ = fds.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), 100) }
            for i in slots.indices where fds[i].revents != 0 {
                guard let ssl = slots[i].ssl else { continue }
                ERR_clear_error()
                let status = SSL_connect(ssl)
                if status == 1 {
                    result.completed += 1
                    if SSL_session_reused(ssl) == 1 { result.resumed += 1 }
                } else {
                    let error = SSL_get_error(ssl, status)
                    if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { continue }
                    result.failed += 1
                }
                close(&slots[i])
            }
        }
        result.seconds = Double(Clock.now() - start) / 1e9
        if let before = cpuBefore, let after = ProcessCPU.seconds(pid: options.serverPID) {
            result.serverCPU = after - before
        }
        for i in slots.indices { close(&slots[i]) }
        return result
    }

    /// A non-blocking connection to `server` with its handshake started, offering `session`.
    private static func open(_ context: OpaquePointer, server: TransportAddress, session: OpaquePointer?) -> Slot? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
        // No TIME_WAIT on this side: thousands of connections a second would use up the ports.
        var abort = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
        var sa = UDPEndpoint.sockaddrIn(server)
        let connected = withUnsafePointer(to: &sa) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 || errno == EINPROGRESS, let ssl = SSL_new(context) else {
            Glibc.close(fd)
            return nil
        }
        SSL_set_fd(ssl, fd)
        if let session { SSL_set_session(ssl, session) }
        _ = SSL_connect(ssl)
        return Slot(fd: fd, ssl: ssl)
    }

    private static func close(_ slot: inout Slot) {
        // Marked shut down, so OpenSSL does not take the session (the seed, shared by every
        // connection) for a broken one and make it unresumable.
        if let ssl = slot.ssl {
            SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN)
            SSL_free(ssl)
        }
        if slot.fd >= 0 { Glibc.close(slot.fd) }
        slot = Slot()
    }

    /// A resumable session from one full handshake: over TLS 1.3 the ticket comes after the
    /// handshake, so the connection reads until OpenSSL has taken one (or 2 s pass).
    private static func seedSession(_ context: OpaquePointer, server: TransportAddress) -> OpaquePointer? {
        guard var slot = open(context, server: server, session: nil), let ssl = slot.ssl else { return nil }
        defer { close(&slot) }
        let deadline = Clock.now() + 2_000_000_000
        var byte: UInt8 = 0
        while Clock.now() < deadline {
            var pfd = pollfd(fd: slot.fd, events: Int16(POLLIN | POLLOUT), revents: 0)
            _ = poll(&pfd, 1, 50)
            ERR_clear_error()
            if SSL_is_init_finished(ssl) != 1 {
                _ = SSL_connect(ssl)
                continue
            }
            if let held = SSL_get_session(ssl), SSL_SESSION_is_resumable(held) == 1 { return SSL_get1_session(ssl) }
            _ = SSL_read(ssl, &byte, 1)
        }
        return nil
    }
}
