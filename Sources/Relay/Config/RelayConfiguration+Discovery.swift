import StunCodec

/// NAT behaviour discovery (RFC 5780 §6, docs/nat-discovery.md): what the listening addresses
/// make of `rfc5780`.
extension RelayConfiguration {
    /// `rfc5780` asked for and not turned off by `no-rfc5780`.
    public var rfc5780Active: Bool { rfc5780 && !noRFC5780 }

    /// The second listening port: `alt-listening-port`, or with `rfc5780` the listening port
    /// plus one, as coturn does (RFC 5780 §6 needs two ports on each address).
    public var effectiveAltListeningPort: UInt16? {
        if let altListeningPort { return altListeningPort }
        guard rfc5780Active, listeningPort < UInt16.max else { return nil }
        return listeningPort + 1
    }

    /// Whether two listening IPs of one family exist: without them there is no alternate
    /// address, and CHANGE-REQUEST gets 420 (RFC 5780 §6).
    public var hasAlternateAddress: Bool {
        let ips = listeningIPs.filter { $0 != .ipv4Any && $0 != .ipv6Any }
        return ips.filter { $0.family == .ipv4 }.count >= 2 || ips.filter { $0.family == .ipv6 }.count >= 2
    }
}
