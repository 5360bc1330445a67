import CStreamIO
import Logging
import RelayCore

// The DTLS context (docs/dtls.md): the same certificate as TLS, loaded at start and again on
// SIGHUP; DTLS 1.2 only, with the cookie exchange.
extension StreamService {
    /// Loads the DTLS context before the loops start. Without `cert` the DTLS listeners stay off
    /// (the TLS warning says why); a certificate that does not load stops the start.
    func prepareDTLS() throws(RelayServer.StartError) {
        guard !configuredDTLSAddresses.isEmpty || !configuredDTLSSharedAddresses.isEmpty, configuration.cert != nil
        else { return }
        if var secret = inherited(Self.dtlsCookieSecretName) {
            _ = relayd_dtls_set_cookie_secret(&secret, secret.count)
        }
        do {
            let context = try TLSContext(
                configuration: configuration, datagram: true, ticketKeys: inherited(Self.dtlsTicketKeysName))
            dtls.withLock { $0 = context }
        } catch {
            throw RelayServer.StartError(description: "cannot load the DTLS certificate: \(error.description)")
        }
    }

    /// SIGHUP: new DTLS sessions get the reloaded certificate; a certificate that does not load
    /// leaves the old one in place (the TLS reload logs why).
    func reloadDTLS(using configuration: RelayConfiguration, logger: Logger) {
        guard dtls.value != nil, let context = try? TLSContext(configuration: configuration, datagram: true) else { return }
        dtls.withLock { $0 = context }
        logger.info(
            "DTLS certificate reloaded", metadata: ["event": "dtls_reloaded", "sha256": "\(context.fingerprint)"])
    }
}
