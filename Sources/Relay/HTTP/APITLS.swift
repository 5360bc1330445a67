/// The HTTPS side of the API listener (docs/tls.md): which certificate and key
/// it serves, TLS 1.2 or later whatever the TURN listeners allow.
extension RelayConfiguration {
    /// Whether the API listener speaks HTTPS: `api-tls`, or an `api-cert`.
    public var apiUsesTLS: Bool { apiTLS || apiCert != nil }

    /// The settings `TLSContext` builds the API's context from: `api-cert`/`api-pkey` (the key
    /// defaulting to the certificate's file), else `cert`/`pkey`; never below TLS 1.2.
    var apiTLSConfiguration: RelayConfiguration {
        var c = self
        if let apiCert {
            c.cert = apiCert
            c.pkey = apiPkey ?? apiCert
        } else if let apiPkey {
            c.pkey = apiPkey
        }
        c.noTLSv1 = true
        c.noTLSv1_1 = true
        return c
    }
}
