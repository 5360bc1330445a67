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

extension RelayConfiguration {
    /// Whether `api-listening-port` is one of TURN's TCP or TLS ports (a TLS port counts once a
    /// `cert` is set): the API is then served on TURN's listeners, on every listening address,
    /// with TURN's certificate (docs/tls.md, "The API on the same port").
    public var apiSharesTURNPort: Bool {
        let tcp = noTCP ? [] : [listeningPort] + (altListeningPort.map { [$0] } ?? [])
        let tls = noTLS || cert == nil ? [] : [tlsListeningPort] + (altTLSListeningPort.map { [$0] } ?? [])
        return (tcp + tls).contains(apiListeningPort)
    }

    /// Whether the loops serve the API's connections (`APIHandoff`): on a TURN port it shares,
    /// or, on a port of its own, when PROXY protocol headers are to be read from balancers
    /// (`proxy-protocol-from`): evhttp cannot read one (docs/tls.md, "Behind a load balancer").
    public var apiServedByLoops: Bool { apiSharesTURNPort || !proxyProtocolFrom.isEmpty }
}
