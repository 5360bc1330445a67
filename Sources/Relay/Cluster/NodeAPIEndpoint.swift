import COpenSSL
import RelayCore
import StunCodec

/// Where a node's admin API is, as it publishes it in the registry (docs/admin.md, "A fleet"):
/// its base URL, and for HTTPS the SHA-256 of its certificate, which `relayd sessions` and
/// `relayd kick` pin when they fan out to every node. The trust comes from Redis: whoever may
/// read the registry may reach the nodes, as whoever may write it already decides their quotas.
enum NodeAPIEndpoint {
    /// `http(s)://address:port` of the API on `address` (the node's own address for clients),
    /// or nil when the API listens on loopback only (no other host can reach it).
    static func url(configuration c: RelayConfiguration, clientAddress: IPAddress?) -> String? {
        let scheme = c.apiUsesTLS || sharesTLSPort(c) ? "https" : "http"
        let ip: IPAddress
        if c.apiSharesTURNPort {
            guard let address = clientAddress else { return nil }
            ip = address
        } else if c.apiListeningIP == .ipv4Any || c.apiListeningIP == .ipv6Any {
            guard let address = clientAddress else { return nil }
            ip = address
        } else {
            ip = c.apiListeningIP
        }
        guard !ip.isLoopback || clientAddress?.isLoopback == true else { return nil }
        let host = ip.family == .ipv6 ? "[\(ip)]" : "\(ip)"
        return "\(scheme)://\(host):\(c.apiListeningPort)"
    }

    /// The lowercase hex SHA-256 of the DER form of the first certificate in `path`.
    static func fingerprint(certificate path: String) -> String? {
        guard let certificate = APIClient.firstCertificate(path) else { return nil }
        defer { X509_free(certificate) }
        return APIClient.sha256Hex(certificate)
    }

    /// The certificate the API serves: on a TURN TLS port it shares, TURN's `cert`; else
    /// `api-cert`, else `cert` (docs/tls.md).
    static func certificatePath(configuration c: RelayConfiguration) -> String? {
        if c.apiSharesTURNPort { return sharesTLSPort(c) ? c.cert : nil }
        return c.apiUsesTLS ? c.apiCert ?? c.cert : nil
    }

    /// The API listens on one of TURN's TLS ports.
    static func sharesTLSPort(_ c: RelayConfiguration) -> Bool {
        guard !c.noTLS, c.cert != nil else { return false }
        return ([c.tlsListeningPort] + (c.altTLSListeningPort.map { [$0] } ?? [])).contains(c.apiListeningPort)
    }
}
