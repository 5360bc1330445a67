import Relay
import RelayCore
import StunCodec
import Testing

/// `denied-peer-ip` / `allowed-peer-ip` ranges: `a-b`, CIDR, or one address, inclusive at both ends.
@Suite struct IPRangeTests {
    private func ip(_ text: String) -> IPAddress { IPAddress(text)! }

    @Test(arguments: [
        ("10.0.0.5-10.0.0.9", "10.0.0.5", "10.0.0.9"),
        ("10.0.0.0/8", "10.0.0.0", "10.255.255.255"),
        ("10.1.2.3/8", "10.0.0.0", "10.255.255.255"),
        ("0.0.0.0/0", "0.0.0.0", "255.255.255.255"),
        ("192.0.2.7/32", "192.0.2.7", "192.0.2.7"),
        ("192.0.2.7", "192.0.2.7", "192.0.2.7"),
        ("172.16.0.0/12", "172.16.0.0", "172.31.255.255"),
        ("100.64.0.0/10", "100.64.0.0", "100.127.255.255"),
        ("fc00::/7", "fc00::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("::/0", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("2001:db8::/64", "2001:db8::", "2001:db8::ffff:ffff:ffff:ffff"),
        ("2001:db8::/65", "2001:db8::", "2001:db8::7fff:ffff:ffff:ffff"),
        ("2001:db8::/63", "2001:db8::", "2001:db8:0:1:ffff:ffff:ffff:ffff"),
        ("2001:db8::1/128", "2001:db8::1", "2001:db8::1"),
        ("fe80::1-fe80::ff", "fe80::1", "fe80::ff"),
        ("::1", "::1", "::1"),
    ])
    func parsesBounds(text: String, lower: String, upper: String) throws {
        let range = try #require(IPRange(text))
        #expect(range.lower == ip(lower))
        #expect(range.upper == ip(upper))
    }

    @Test(arguments: [
        "", "-", "10.0.0.9-10.0.0.5", "10.0.0.1-::1", "10.0.0.0/33", "fc00::/129", "10.0.0.0/", "10.0.0.0/-1",
        "10.0.0.0/+8", "10.0.0.0/8/8", "10.0.0.0/0008", "10.0.0.1-", "-10.0.0.1", "10.0.0.1 - 10.0.0.2",
        "10.0.0.0/a", "host.example", "10.0.0.1-10.0.0.2-10.0.0.3",
    ])
    func rejectsMalformedRanges(text: String) {
        #expect(IPRange(text) == nil)
    }

    @Test(arguments: [
        ("10.0.0.4", false), ("10.0.0.5", true), ("10.0.0.7", true), ("10.0.0.9", true), ("10.0.0.10", false),
        ("9.255.255.255", false), ("::ffff:10.0.0.7", false),
    ])
    func unalignedIPv4RangeIsExact(address: String, inside: Bool) throws {
        let range = try #require(IPRange("10.0.0.5-10.0.0.9"))
        #expect(range.contains(ip(address)) == inside)
    }

    @Test(arguments: [
        ("2001:db8::ffff:ffff:ffff:fffe", false), ("2001:db8::ffff:ffff:ffff:ffff", true),
        ("2001:db8:0:1::", true), ("2001:db8:0:1:ffff::", true), ("2001:db8:0:2::", true),
        ("2001:db8:0:2::1", false), ("10.0.0.1", false),
    ])
    func unalignedIPv6RangeCrossingTheHalvesIsExact(address: String, inside: Bool) throws {
        let range = try #require(IPRange("2001:db8::ffff:ffff:ffff:ffff-2001:db8:0:2::"))
        #expect(range.contains(ip(address)) == inside)
    }

    @Test(arguments: [
        ("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false), ("fc00::", true), ("fd12:3456::1", true),
        ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true), ("fe00::", false),
    ])
    func ipv6PrefixEdges(address: String, inside: Bool) throws {
        #expect(try #require(IPRange("fc00::/7")).contains(ip(address)) == inside)
    }

    @Test(arguments: [
        ("172.15.255.255", false), ("172.16.0.0", true), ("172.31.255.255", true), ("172.32.0.0", false),
    ])
    func ipv4PrefixEdges(address: String, inside: Bool) throws {
        #expect(try #require(IPRange("172.16.0.0/12")).contains(ip(address)) == inside)
    }

    @Test func wholeSpaceHoldsEveryAddressOfItsFamilyOnly() throws {
        let all4 = try #require(IPRange("0.0.0.0/0"))
        #expect(all4.contains(ip("0.0.0.0")))
        #expect(all4.contains(ip("255.255.255.255")))
        #expect(!all4.contains(ip("::")))
        let all6 = try #require(IPRange("::/0"))
        #expect(all6.contains(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")))
        #expect(!all6.contains(ip("0.0.0.0")))
    }

    @Test(arguments: [
        ("10.0.0.0/8", "10.0.0.0/8"), ("10.0.0.0-10.255.255.255", "10.0.0.0/8"),
        ("10.0.0.5-10.0.0.9", "10.0.0.5-10.0.0.9"), ("10.0.0.4-10.0.0.7", "10.0.0.4/30"),
        ("10.0.0.5", "10.0.0.5"), ("0.0.0.0/0", "0.0.0.0/0"), ("fc00::/7", "fc00::/7"),
        ("2001:db8::/63", "2001:db8::/63"), ("::/0", "::/0"),
        ("2001:db8::ffff:ffff:ffff:ffff-2001:db8:0:2::", "2001:db8::ffff:ffff:ffff:ffff-2001:db8:0:2::"),
    ])
    func descriptionPrefersCIDR(text: String, description: String) throws {
        let range = try #require(IPRange(text))
        #expect(range.description == description)
        #expect(IPRange(range.description) == range)
    }

    @Test func explicitBoundsMustBeOrderedAndOfOneFamily() {
        #expect(IPRange(lower: ip("10.0.0.1"), upper: ip("10.0.0.1")) != nil)
        #expect(IPRange(lower: ip("10.0.0.2"), upper: ip("10.0.0.1")) == nil)
        #expect(IPRange(lower: ip("10.0.0.1"), upper: ip("::1")) == nil)
        #expect(IPRange(address: ip("10.0.0.1"), prefixLength: 33) == nil)
        #expect(IPRange(address: ip("::1"), prefixLength: 128)?.upper == ip("::1"))
    }
}
