import StunCodec

/// The STUN and TURN URIs (RFC 7064, RFC 7065) the credential service hands out: the
/// `advertised-uri` values when configured, otherwise derived from the listeners.
public struct ICEServerURIs: Sendable, Equatable {
    /// `stun:` and `stuns:` URIs (no credentials needed).
    public var stun: [String]
    /// `turn:` and `turns:` URIs (used with the credentials).
    public var turn: [String]

    public init(stun: [String], turn: [String]) {
        self.stun = stun
        self.turn = turn
    }

    /// `advertised-uri` values if any, split by scheme; otherwise derived:
    /// `stun:host:port` and `turn:host:port?transport=udp` (unless `no-udp`),
    /// `turn:host:port?transport=tcp` (unless `no-tcp`), `turns:host:tls-port?transport=tcp`
    /// (unless `no-tls`, or no `cert` to serve TLS with). `stun-only` leaves out the TURN URIs,
    /// `no-stun` the STUN one.
    public init(configuration c: RelayConfiguration, interfaceAddresses: [IPAddress] = []) {
        if !c.advertisedURIs.isEmpty {
            stun = c.advertisedURIs.filter { $0.lowercased().hasPrefix("stun") }
            turn = c.advertisedURIs.filter { $0.lowercased().hasPrefix("turn") }
            return
        }
        let host = Self.host(configuration: c, interfaceAddresses: interfaceAddresses).map(Self.uriHost) ?? "localhost"
        let port = c.listeningPort
        stun = []
        turn = []
        if !c.noUDP && !c.noStun { stun.append("stun:\(host):\(port)") }
        guard !c.stunOnly else { return }
        if !c.noUDP { turn.append("turn:\(host):\(port)?transport=udp") }
        if !c.noTCP { turn.append("turn:\(host):\(port)?transport=tcp") }
        if !c.noTLS && c.cert != nil { turn.append("turns:\(host):\(c.tlsListeningPort)?transport=tcp") }
    }

    /// The address clients should use: the first `external-ip` public address, else the first
    /// `listening-ip` that is not a wildcard, else the first interface address that is not
    /// loopback (then any interface address).
    public static func host(configuration c: RelayConfiguration, interfaceAddresses: [IPAddress]) -> IPAddress? {
        if let external = c.externalIPs.first { return external.publicIP }
        if let listening = c.listeningIPs.first(where: { !$0.isWildcard }) { return listening }
        let usable = interfaceAddresses.filter { !$0.isWildcard }
        return usable.first { !$0.isLoopback } ?? usable.first
    }

    /// The host part of a URI: IPv6 addresses in brackets (RFC 3986 §3.2.2).
    public static func uriHost(_ ip: IPAddress) -> String {
        ip.family == .ipv6 ? "[\(ip)]" : "\(ip)"
    }

}
