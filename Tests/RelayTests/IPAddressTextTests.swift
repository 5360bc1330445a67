import StunCodec
import Testing

/// Address text as RFC 4291 §2.2 writes it and RFC 5952 prints it.
@Suite struct IPAddressTextTests {
    @Test(arguments: [
        ("::", "::", IPAddress.Family.ipv6),
        ("::1", "::1", .ipv6),
        ("1::", "1::", .ipv6),
        ("fe80::1", "fe80::1", .ipv6),
        ("FE80::1", "fe80::1", .ipv6),
        ("::ffff:1.2.3.4", "::ffff:1.2.3.4", .ipv6),
        ("::ffff:102:304", "::ffff:1.2.3.4", .ipv6),
        ("64:ff9b::7f00:1", "64:ff9b::7f00:1", .ipv6),
        ("64:ff9b::127.0.0.1", "64:ff9b::7f00:1", .ipv6),
        ("2001:db8::1", "2001:db8::1", .ipv6),
        ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1", .ipv6),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2:3:4:5:6", .ipv6),
        ("2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1", .ipv6),
        ("2001:0:0:1:0:0:0:1", "2001:0:0:1::1", .ipv6),
        ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1", .ipv6),
        ("1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0", .ipv6),
        ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", .ipv6),
        ("0.0.0.0", "0.0.0.0", .ipv4),
        ("127.0.0.1", "127.0.0.1", .ipv4),
        ("255.255.255.255", "255.255.255.255", .ipv4),
        ("10.0.0.9", "10.0.0.9", .ipv4),
    ])
    func parsesAndPrintsCanonically(text: String, canonical: String, family: IPAddress.Family) throws {
        let address = try #require(IPAddress(text))
        #expect(address.family == family)
        #expect(address.description == canonical)
        #expect(IPAddress(address.description) == address)
    }

    @Test(arguments: [
        "", ":", ":::", "1:::2", "1::2::3", "12345::", "1.2.3", "01.2.3.4", "256.1.1.1", "1.2.3.4.5",
        "1.2.3.-4", "+1.2.3.4", " 1.2.3.4", "1.2.3.4 ", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "1:2:3:4:5:6:7:8::",
        ":1::2", "1::2:", "g::1", "+1::", "-0::", "::+1", "1::1.2.3", "1.2.3.4::", "::1.2.3.04",
        "1:2:3:4:5:6:7:1.2.3.4", "[::1]", "fe80::1%eth0", "::ffff:1.2.3.4:5",
    ])
    func rejectsMalformedText(text: String) {
        #expect(IPAddress(text) == nil)
    }

    @Test func ipv4ValueIsHostOrder() throws {
        let address = try #require(IPAddress("192.0.2.1"))
        #expect(address.ipv4Value == 0xC000_0201)
    }

    @Test func ipv6StorageIsBigEndianHalves() throws {
        let address = try #require(IPAddress("2001:db8::ffff:1"))
        #expect(address.high == 0x2001_0db8_0000_0000)
        #expect(address.low == 0x0000_0000_ffff_0001)
    }
}
