import StunCodec

/// Address ranges a relay must not reach unless the operator opens them
/// (docs/peer-policy.md; IANA special-purpose registries, RFC 6890).
enum SpecialPurposeRanges {
    static let ipv4: [IPRange] = [
        "0.0.0.0/8",  // "this network", unspecified
        "10.0.0.0/8",  // RFC 1918
        "100.64.0.0/10",  // CGNAT, RFC 6598
        "127.0.0.0/8",  // loopback
        "169.254.0.0/16",  // link-local, incl. 169.254.169.254 metadata
        "172.16.0.0/12",  // RFC 1918
        "192.0.0.0/24",  // IETF protocol assignments
        "192.0.2.0/24",  // TEST-NET-1
        "192.88.99.0/24",  // 6to4 relay anycast (deprecated)
        "192.168.0.0/16",  // RFC 1918
        "198.18.0.0/15",  // benchmarking
        "198.51.100.0/24",  // TEST-NET-2
        "203.0.113.0/24",  // TEST-NET-3
        "224.0.0.0/4",  // multicast
        "240.0.0.0/4",  // reserved, incl. 255.255.255.255 broadcast
    ].map { IPRange($0)! }

    static let ipv6: [IPRange] = [
        "::/128",  // unspecified
        "::1/128",  // loopback
        "100::/64",  // discard-only
        "2001::/32",  // Teredo: embeds obfuscated IPv4 addresses
        "2001:db8::/32",  // documentation
        "64:ff9b:1::/48",  // local-use NAT64
        "fc00::/7",  // unique local
        "fe80::/10",  // link-local
        "fec0::/10",  // site-local (deprecated)
        "ff00::/8",  // multicast
    ].map { IPRange($0)! }

    static func contains(_ ip: IPAddress) -> Bool {
        let table = ip.family == .ipv4 ? ipv4 : ipv6
        for range in table where range.contains(ip) { return true }
        return false
    }
}
