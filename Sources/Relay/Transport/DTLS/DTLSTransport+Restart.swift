import RelayCore
import COpenSSL
import CStreamIO
import Logging

// A DTLS client that restarts from the same address and port (docs/dtls.md, "A client that
// restarts"). Its new ClientHello (epoch 0) reaches the socket connected to it, never the
// listener, so the session's socket does the cookie exchange itself, statelessly and with the
// listener's cookies (RFC 6347 §4.2.1). RFC 6347 §4.2.8 lets the server abandon the old
// association once the client has shown it receives at its address, by completing a cookie
// exchange or a whole handshake, and requires it after the new Finished; relayd takes the first:
// a ClientHello with a valid cookie replaces the OpenSSL session, on the same socket. The TURN
// allocation of the 5-tuple (RFC 8656 §3.1) carries on if the new handshake completes and is
// deleted with the session if it does not. A ClientHello without a valid cookie, or garbage,
// leaves the session as it is.
extension DTLSTransport {
    /// The ClientHello the session's socket set aside: a HelloVerifyRequest from that socket when
    /// its cookie is missing or stale, a new handshake when it is valid, a counted drop when it is
    /// malformed.
    func clientHelloArrived(on session: DTLSSession, now: Int64) {
        let fresh = service.dtls.value.flatMap { SSL_new($0.context) }
        ERR_clear_error()
        let result = relayd_dtls_listen_on_session(fresh, session.socket, &session.peer, session.io)
        guard result == 1, let fresh else {
            if let fresh { SSL_free(fresh) }
            if result == 0 { sessionHelloVerifyRequests &+= 1 } else { sessionDrops &+= 1 }
            return
        }
        let hadAllocation = loop.core.allocation(for: session.origin.fiveTuple) != nil
        session.restart(with: fresh, now: now)
        logger.debug(
            "DTLS session restarted by its client",
            metadata: [
                "event": "dtls_restart", "five_tuple": "\(session.origin.fiveTuple)",
                "allocation": "\(hadAllocation ? "kept until the handshake completes" : "none")",
            ])
    }

    /// The session's handshake completed, a restart's included: its allocation, if any, carries on.
    func handshakeCompleted(_ session: DTLSSession) {
        handshakes.completed &+= 1
        if session.restarting {
            restarts.completed &+= 1
            logger.debug(
                "DTLS session restarted",
                metadata: [
                    "event": "dtls_restarted", "five_tuple": "\(session.origin.fiveTuple)",
                    "allocation": "\(loop.core.allocation(for: session.origin.fiveTuple) != nil ? "kept" : "none")",
                ])
        }
        session.completeHandshake()
    }
}
