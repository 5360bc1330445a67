import CStreamIO
import RelayCore

// The TLS and DTLS keys a live upgrade hands on (docs/live-upgrade.md): the session-ticket keys
// of the TLS and the DTLS context, so a client resumes its session (RFC 8446 §2.2, RFC 5077)
// with the new process, and the DTLS cookie secret, so a ClientHello answering a
// HelloVerifyRequest of the old process is accepted by the new one (RFC 6347 §4.2.1).
extension StreamService {
    static let tlsTicketKeysName = "tls-ticket-keys"
    static let dtlsTicketKeysName = "dtls-ticket-keys"
    static let dtlsCookieSecretName = "dtls-cookie-secret"
    static let cookieSecretLength = 32

    /// The keys of the contexts in use now, for the heir.
    func exportedKeys() -> [JournalKey] {
        var keys: [JournalKey] = []
        if let tls = tls.value { keys.append(JournalKey(name: Self.tlsTicketKeysName, bytes: tls.ticketKeys)) }
        if let dtls = dtls.value {
            keys.append(JournalKey(name: Self.dtlsTicketKeysName, bytes: dtls.ticketKeys))
            var secret = [UInt8](repeating: 0, count: Self.cookieSecretLength)
            if relayd_dtls_cookie_secret(&secret, secret.count) == 0 {
                keys.append(JournalKey(name: Self.dtlsCookieSecretName, bytes: secret))
            }
        }
        return keys
    }

    /// The inherited key named `name`, if it has the length its use needs; a key of another
    /// length is ignored (fresh keys are drawn instead).
    func inherited(_ name: String) -> [UInt8]? {
        let wanted = name == Self.dtlsCookieSecretName ? Self.cookieSecretLength : TLSContext.ticketKeysLength
        return inheritedKeys.first { $0.name == name && $0.bytes.count == wanted }?.bytes
    }
}
