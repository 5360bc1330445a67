import Relay
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The peer policy (RFC 8656 §21.3; docs/peer-policy.md): deny
/// special-purpose ranges and the server's own service ports, allow the relay's own relayed
/// addresses, honour `allowed-peer-ip` / `denied-peer-ip` to the address.
@Suite struct PeerPolicyTests {
    private static func verdict(
        _ peer: String, configuration: RelayConfiguration = RelayConfiguration(), interfaces: [IPAddress] = []
    ) -> PeerPolicy.Verdict {
        PeerPolicy(configuration: configuration, interfaceAddresses: interfaces).verdict(for: .literal(peer))
    }

    /// A port that is neither a default service port nor in the default relay range.
    private static func at(_ ip: String) -> String { ip.contains(":") ? "[\(ip)]:40000" : "\(ip):40000" }

    /// First and last address of each range denied by default.
    static let deniedEdges: [(range: String, first: String, last: String)] = [
        ("0.0.0.0/8", "0.0.0.0", "0.255.255.255"),
        ("10.0.0.0/8", "10.0.0.0", "10.255.255.255"),
        ("100.64.0.0/10", "100.64.0.0", "100.127.255.255"),
        ("127.0.0.0/8", "127.0.0.0", "127.255.255.255"),
        ("169.254.0.0/16", "169.254.0.0", "169.254.255.255"),
        ("172.16.0.0/12", "172.16.0.0", "172.31.255.255"),
        ("192.0.0.0/24", "192.0.0.0", "192.0.0.255"),
        ("192.0.2.0/24", "192.0.2.0", "192.0.2.255"),
        ("192.88.99.0/24", "192.88.99.0", "192.88.99.255"),
        ("192.168.0.0/16", "192.168.0.0", "192.168.255.255"),
        ("198.18.0.0/15", "198.18.0.0", "198.19.255.255"),
        ("198.51.100.0/24", "198.51.100.0", "198.51.100.255"),
        ("203.0.113.0/24", "203.0.113.0", "203.0.113.255"),
        ("224.0.0.0/4", "224.0.0.0", "239.255.255.255"),
        ("240.0.0.0/4", "240.0.0.0", "255.255.255.255"),
        ("::/128", "::", "::"),
        ("::1/128", "::1", "::1"),
        ("100::/64", "100::", "100::ffff:ffff:ffff:ffff"),
        ("2001::/32", "2001::", "2001:0:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("2001:db8::/32", "2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("64:ff9b:1::/48", "64:ff9b:1::", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff"),
        ("fc00::/7", "fc00::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("fe80::/10", "fe80::", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("fec0::/10", "fec0::", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("ff00::/8", "ff00::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
    ]

    @Test("The first and the last address of every special-purpose range are denied", arguments: deniedEdges)
    func rangeEdgesDenied(range: String, first: String, last: String) {
        #expect(Self.verdict(Self.at(first)) == .deniedSpecialPurpose, "\(first) in \(range)")
        #expect(Self.verdict(Self.at(last)) == .deniedSpecialPurpose, "\(last) in \(range)")
    }

    /// Public addresses just outside a denied range's edge.
    static let publicNeighbours: [String] = [
        "1.0.0.0", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255", "128.0.0.0",
        "169.253.255.255", "169.255.0.0", "172.15.255.255", "172.32.0.0", "191.255.255.255", "192.0.1.0",
        "192.0.1.255", "192.0.3.0", "192.88.98.255", "192.88.100.0", "192.167.255.255", "192.169.0.0",
        "198.17.255.255", "198.20.0.0", "198.51.99.255", "198.51.101.0", "203.0.112.255", "203.0.114.0",
        "223.255.255.255", "2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff",
        "2001:db9::", "64:ff9b:2::", "2606:4700:4700::1111",
    ]

    @Test("The public address just outside a denied range is allowed", arguments: publicNeighbours)
    func publicNeighbourAllowed(ip: String) {
        #expect(Self.verdict(Self.at(ip)) == .allowed)
    }

    @Test(
        "IPv6 spellings of loopback, unspecified, link-local, ULA, site-local, multicast and embedded private IPv4 are denied",
        arguments: [
            "::1", "::", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "fe80::1", "fc00::1", "fd00:ec2::254", "fec0::1", "ff02::1", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe",
            "2002:c0a8:101::1", "::ffff:0.0.0.0", "::ffff:255.255.255.255",
        ])
    func ipv6FormsDenied(ip: String) {
        #expect(Self.verdict(Self.at(ip)) != .allowed)
    }

    @Test(
        "IPv6 forms embedding a public IPv4 address are judged as that address: allowed",
        arguments: ["::ffff:1.2.3.4", "64:ff9b::102:304", "2002:102:304::1"])
    func ipv6FormsOfPublicIPv4Allowed(ip: String) {
        #expect(Self.verdict(Self.at(ip)) == .allowed)
    }

    /// A server on a public address with every listener, API and metrics enabled and loopback peers allowed.
    private static let serviceConfiguration: RelayConfiguration = {
        var c = RelayConfiguration()
        c.listeningIPs = [.literal("93.184.216.34")]
        c.relayIPs = [.literal("93.184.216.34")]
        c.listeningPort = 3478
        c.tlsListeningPort = 5349
        c.altListeningPort = 3479
        c.apiListeningPort = 8080
        c.prometheus = true
        c.prometheusPort = 9641
        c.allowLoopbackPeers = true
        return c
    }()

    @Test(
        "The server's own service ports on its own addresses are denied, even with allow-loopback-peers",
        arguments: [
            "93.184.216.34:3478", "93.184.216.34:5349", "93.184.216.34:3479", "93.184.216.34:8080",
            "93.184.216.34:9641", "127.0.0.1:3478", "127.0.0.1:5349", "127.0.0.1:8080", "127.0.0.1:9641",
            "127.1.2.3:3478", "0.0.0.0:3478", "[::1]:3478", "[::1]:9641", "[::]:8080", "[::ffff:127.0.0.1]:3478",
            "[::ffff:93.184.216.34]:5349", "10.20.30.40:3478", "[2001:4860::5]:8080",
        ])
    func ownServicePortsDenied(peer: String) {
        let verdict = Self.verdict(
            peer, configuration: Self.serviceConfiguration,
            interfaces: [.literal("10.20.30.40"), .literal("2001:4860::5")])
        #expect(verdict == .deniedServicePort)
    }

    @Test(
        "Other ports of the server's own addresses, and service ports of other hosts, are allowed",
        arguments: ["93.184.216.34:40000", "127.0.0.1:40000", "[::1]:40000", "1.2.3.4:3478", "1.2.3.4:8080"])
    func otherPortsAllowed(peer: String) {
        #expect(Self.verdict(peer, configuration: Self.serviceConfiguration) == .allowed)
    }

    @Test("Without prometheus its port is not a service port")
    func prometheusPortOnlyWhenEnabled() {
        var c = Self.serviceConfiguration
        c.prometheus = false
        #expect(Self.verdict("93.184.216.34:9641", configuration: c) == .allowed)
    }

    /// A relay on a private address behind 1:1 NAT with a special-purpose public form, relay ports 50000–50099.
    private static let relayConfiguration: RelayConfiguration = {
        var c = RelayConfiguration()
        c.listeningIPs = [.literal("10.0.0.5")]
        c.relayIPs = [.literal("10.0.0.5")]
        c.externalIPs = [.init(publicIP: .literal("203.0.113.5"), privateIP: .literal("10.0.0.5"))]
        c.minPort = 50000
        c.maxPort = 50099
        return c
    }()

    @Test(
        "The relay's own addresses within the relay port range are relayed addresses (reachable while an allocation holds them), also in their external-ip form",
        arguments: [
            ("10.0.0.5:50000", true), ("10.0.0.5:50099", true), ("10.0.0.5:49999", false), ("10.0.0.5:50100", false),
            ("203.0.113.5:50000", true), ("203.0.113.5:50099", true), ("203.0.113.5:50100", false),
            ("[::ffff:10.0.0.5]:50042", true), ("10.0.0.6:50000", false), ("10.0.0.5:3478", false),
        ])
    func relayAddressesAllowed(peer: String, relayed: Bool) {
        #expect((Self.verdict(peer, configuration: Self.relayConfiguration) == .relayedAddress) == relayed)
    }

    @Test("allowed-peer-ip over the relay address opens its other ports, not its relay ports")
    func allowedRangeLeavesRelayPortsToAllocations() {
        var c = Self.relayConfiguration
        c.allowedPeerIPs = [IPRange("10.0.0.0/24")!]
        #expect(Self.verdict("10.0.0.5:50042", configuration: c) == .relayedAddress)
        #expect(Self.verdict("10.0.0.5:40000", configuration: c) == .allowed)
    }

    @Test(
        "allowed-peer-ip and denied-peer-ip ranges that are not prefix-aligned are honoured to the address",
        arguments: [
            ("10.0.0.4", PeerPolicy.Verdict.deniedSpecialPurpose), ("10.0.0.5", .allowed), ("10.0.0.9", .allowed),
            ("10.0.0.10", .deniedSpecialPurpose), ("1.2.3.9", .allowed), ("1.2.3.10", .deniedByConfiguration),
            ("1.2.3.20", .deniedByConfiguration), ("1.2.3.21", .allowed), ("fd00::7", .deniedSpecialPurpose),
            ("fd00::8", .allowed), ("fd00::9", .allowed), ("fd00::a", .deniedSpecialPurpose),
        ])
    func configuredRanges(ip: String, expected: PeerPolicy.Verdict) {
        var c = RelayConfiguration()
        c.allowedPeerIPs = [IPRange("10.0.0.5-10.0.0.9")!, IPRange("fd00::8-fd00::9")!]
        c.deniedPeerIPs = [IPRange("1.2.3.10-1.2.3.20")!]
        #expect(Self.verdict(Self.at(ip), configuration: c) == expected)
    }

    @Test(
        "denied-peer-ip overrides allowed-peer-ip",
        arguments: [("10.0.0.4", true), ("10.0.0.5", false), ("10.0.0.6", false), ("10.0.0.7", true)])
    func deniedOverridesAllowed(ip: String, allowed: Bool) {
        var c = RelayConfiguration()
        c.allowedPeerIPs = [IPRange("10.0.0.0/8")!]
        c.deniedPeerIPs = [IPRange("10.0.0.5-10.0.0.6")!]
        let verdict = Self.verdict(Self.at(ip), configuration: c)
        #expect(verdict == (allowed ? .allowed : .deniedByConfiguration))
    }

    @Test("denied-peer-ip also catches an IPv4 address written in IPv4-mapped IPv6 form")
    func deniedMappedForm() {
        var c = RelayConfiguration()
        c.deniedPeerIPs = [IPRange("1.2.3.0/24")!]
        #expect(Self.verdict("[::ffff:1.2.3.4]:40000", configuration: c) == .deniedByConfiguration)
        #expect(Self.verdict("1.2.3.4:40000", configuration: c) == .deniedByConfiguration)
    }

    @Test(
        "allow-loopback-peers opens loopback, and only loopback",
        arguments: ["127.0.0.1", "127.255.255.254", "::1", "::ffff:127.0.0.1"])
    func loopbackWhenAllowed(ip: String) {
        var c = RelayConfiguration()
        c.allowLoopbackPeers = true
        #expect(Self.verdict(Self.at(ip), configuration: c) == .allowed)
        #expect(Self.verdict(Self.at("10.0.0.1"), configuration: c) == .deniedSpecialPurpose)
    }
}
