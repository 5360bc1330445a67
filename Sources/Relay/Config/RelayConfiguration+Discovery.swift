import StunCodec

/// NAT behaviour discovery (RFC 5780 §6, docs/nat-discovery.md): what the listening addresses
/// make of `rfc5780`.
extension RelayConfiguration {
    /// `rfc5780` asked for and not turned off by `no-rfc5780`.
    public var rfc5780Active: Bool { rfc5780 && !noRFC5780 }

    /// The second UDP listening port: `alt-listening-port`, or with `rfc5780` and an alternate
    /// address the listening port plus one, as coturn does (RFC 5780 §6 needs two ports on each
    /// address). The implicit one is for UDP only: TCP listens on `alt-listening-port` when set.
    public var effectiveAltListeningPort: UInt16? {
        if let altListeningPort { return altListeningPort }
        guard rfc5780Active, hasAlternateAddress, listeningPort < UInt16.max else { return nil }
        return listeningPort + 1
    }

    /// Whether two listening IPs of one family and scope exist (two loopback, or two others;
    /// wildcards do not count): without them there is no alternate address, and CHANGE-REQUEST
    /// gets 420 (RFC 5780 §6).
    public var hasAlternateAddress: Bool {
        let ips = Set(listeningIPs.filter { !$0.isWildcard })
        for family in [IPAddress.Family.ipv4, .ipv6] {
            let loopback = ips.filter { $0.family == family && $0.isLoopback }
            let other = ips.filter { $0.family == family && !$0.isLoopback }
            if loopback.count >= 2 || other.count >= 2 { return true }
        }
        return false
    }
}
