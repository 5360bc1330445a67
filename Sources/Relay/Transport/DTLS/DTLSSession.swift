import RelayCore
import CLibevent
import COpenSSL
import CStreamIO
import Glibc

/// One DTLS client (docs/dtls.md) on its loop thread: a UDP socket connected to the client and
/// bound to the listener's address (the kernel hands it the client's datagrams, SO_REUSEPORT),
/// and its OpenSSL session, which reads and writes that socket itself (a datagram BIO behind the
/// filter of `io`). Each record carries one STUN message or ChannelData (RFC 8656 §3.1),
/// unpadded as over UDP. A client that restarts from the same address and port gets a new
/// OpenSSL session on the same socket (RFC 6347 §4.2.8, `restart(with:now:)`).
final class DTLSSession {
    let socket: Int32
    private(set) var ssl: OpaquePointer
    /// What the socket saw before OpenSSL: ClientHellos set aside once the handshake is done,
    /// datagrams that are not DTLS records dropped and counted.
    let io: OpaquePointer
    /// The client's address as a `sockaddr_storage`, for the datagram BIO of a new session.
    var peer: sockaddr_storage
    let origin: ClientOrigin
    var readEvent: OpaquePointer?
    /// When the current handshake started: at the cookie exchange, again at a restart.
    private(set) var handshakeStartedAt: Int64
    var lastInputAt: Int64
    var handshakeDone = false
    /// True while the handshake is a restart's (RFC 6347 §4.2.8): the session had one before.
    private(set) var restarting = false
    /// True once a request on this session created an allocation (it is no longer pending).
    var hasAllocated = false

    init(
        socket: Int32, ssl: OpaquePointer, io: OpaquePointer, peer: sockaddr_storage, origin: ClientOrigin, now: Int64
    ) {
        self.socket = socket
        self.ssl = ssl
        self.io = io
        self.peer = peer
        self.origin = origin
        handshakeStartedAt = now
        lastInputAt = now
    }

    /// The handshake finished: from now on a ClientHello on the socket is set aside for the
    /// cookie check of a restart instead of reaching OpenSSL, unless it is this session's own
    /// (same random) arriving late or twice, which is dropped.
    func completeHandshake() {
        handshakeDone = true
        restarting = false
        relayd_dtls_io_handshake_done(io, ssl)
    }

    /// A ClientHello with a valid cookie came on this socket (the client showed it receives at
    /// its address, RFC 6347 §4.2.8): the old association is abandoned without a close_notify
    /// (the client no longer has its keys) and `fresh`, which holds that ClientHello, runs the
    /// new handshake on the same socket.
    func restart(with fresh: OpaquePointer, now: Int64) {
        SSL_free(ssl)
        ssl = fresh
        handshakeDone = false
        restarting = true
        handshakeStartedAt = now
        lastInputAt = now
    }

    /// Says close_notify when the handshake completed, then frees the session and the socket.
    func free() {
        if let readEvent { event_free(readEvent) }
        readEvent = nil
        if handshakeDone {
            ERR_clear_error()
            SSL_shutdown(ssl)
        }
        SSL_free(ssl)
        relayd_dtls_io_free(io)
        close(socket)
    }
}
