import RelayCore
import CLibevent
import COpenSSL
import Glibc

/// One DTLS client (docs/dtls.md) on its loop thread: a UDP socket connected to the client and
/// bound to the listener's address (the kernel hands it the client's datagrams, SO_REUSEPORT),
/// and its OpenSSL session, which reads and writes that socket itself (a datagram BIO). Each
/// record carries one STUN message or ChannelData (RFC 8656 §3.1), unpadded as over UDP.
final class DTLSSession {
    let socket: Int32
    let ssl: OpaquePointer
    let origin: ClientOrigin
    var readEvent: OpaquePointer?
    let acceptedAt: Int64
    var lastInputAt: Int64
    var handshakeDone = false
    /// True once a request on this session created an allocation (it is no longer pending).
    var hasAllocated = false

    init(socket: Int32, ssl: OpaquePointer, origin: ClientOrigin, now: Int64) {
        self.socket = socket
        self.ssl = ssl
        self.origin = origin
        acceptedAt = now
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
        close(socket)
    }
}
