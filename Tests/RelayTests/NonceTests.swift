import Relay
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Stateless nonces (RFC 8489 §9.2): issue time plus an HMAC over it and the client IP.
@Suite struct NonceTests {
    private static let key: [UInt8] = Array(0..<32)
    private static let issued: Int64 = 1_700_000_000
    private static let client = IPAddress.literal("192.0.2.1")
    private let nonces = NonceGenerator(key: key, lifetime: 600)

    private func check(_ nonce: String, client: IPAddress = client, now: Int64) -> NonceGenerator.Verdict {
        Array(nonce.utf8).withUnsafeBytes { nonces.check($0, client: client, now: now) }
    }

    @Test("A nonce is 24 lowercase hex digits: issue time then a truncated HMAC")
    func format() {
        let nonce = nonces.make(for: Self.client, now: Self.issued)
        #expect(nonce.utf8.count == 24)
        #expect(nonce.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        #expect(nonce.hasPrefix("6553f100"))
    }

    /// The values are HMAC-SHA1 over the documented layout, computed outside this code (Python's
    /// `hmac`): nodes of two versions in one cluster, or a live upgrade's two processes, must
    /// accept each other's nonces.
    @Test("A nonce's digits are fixed by its layout, for IPv4 and IPv6 clients")
    func exactDigits() {
        #expect(nonces.make(for: Self.client, now: Self.issued) == "6553f1004eb66e52606f9d43")
        #expect(nonces.make(for: .literal("2001:db8::1"), now: Self.issued) == "6553f1006fee545e3921f7f8")
        #expect(check("6553f1004eb66e52606f9d43", now: Self.issued) == .fresh)
        // With both features announced: the cookie, and 'S' and the feature bits under the HMAC.
        let announced = nonces.make(for: Self.client, now: Self.issued, features: [.passwordAlgorithms, .usernameAnonymity])
        #expect(announced == "obMatJos2wAAA6553f100e8713421c097ef41")
        #expect(check("obMatJos2wAAA6553f100e8713421c097ef41", now: Self.issued) == .fresh)
    }

    @Test(
        "A nonce is fresh from its issue until stale-nonce seconds later, then stale",
        arguments: [
            (0, NonceGenerator.Verdict.fresh), (1, .fresh), (599, .fresh), (600, .stale), (86_400, .stale),
            (-5, .fresh), (-6, .stale),
        ]
            as [(Int64, NonceGenerator.Verdict)])
    func freshThenStale(age: Int64, verdict: NonceGenerator.Verdict) {
        let nonce = nonces.make(for: Self.client, now: Self.issued)
        #expect(check(nonce, now: Self.issued + age) == verdict)
    }

    @Test(
        "A nonce issued to another client IP is invalid",
        arguments: ["192.0.2.2", "::ffff:192.0.2.1", "2001:db8::1", "0.0.0.0"])
    func otherClient(other: String) {
        let nonce = nonces.make(for: Self.client, now: Self.issued)
        #expect(check(nonce, client: .literal(other), now: Self.issued) == .invalid)
    }

    @Test("IPv6 clients get nonces too")
    func ipv6Client() {
        let v6 = IPAddress.literal("2001:db8::1")
        let nonce = nonces.make(for: v6, now: Self.issued)
        #expect(check(nonce, client: v6, now: Self.issued + 10) == .fresh)
    }

    @Test("Changing any one character of a nonce makes it invalid", arguments: 0..<24)
    func tampered(index: Int) {
        var bytes = Array(nonces.make(for: Self.client, now: Self.issued).utf8)
        bytes[index] = bytes[index] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
        #expect(check(String(decoding: bytes, as: UTF8.self), now: Self.issued) == .invalid)
    }

    @Test("With password algorithms announced, the nonce starts with the cookie obMatJos2gAAA (RFC 8489 §9.2.1)")
    func cookie() {
        let nonce = nonces.make(for: Self.client, now: Self.issued, features: .passwordAlgorithms)
        #expect(nonce.hasPrefix("obMatJos2gAAA") && nonce.utf8.count == 37)
        let verdict = Array(nonce.utf8).withUnsafeBytes { nonces.check($0, client: Self.client, now: Self.issued) }
        #expect(verdict == .fresh)
        #expect(Array(nonce.utf8).withUnsafeBytes { SecurityFeatures.announced(in: $0) } == .passwordAlgorithms)
    }

    @Test("Changing any one character of a nonce with the cookie, the cookie included, makes it invalid", arguments: 0..<37)
    func cookieTampered(index: Int) {
        var bytes = Array(nonces.make(for: Self.client, now: Self.issued, features: .passwordAlgorithms).utf8)
        bytes[index] = bytes[index] == UInt8(ascii: "A") ? UInt8(ascii: "Q") : UInt8(ascii: "A")
        let verdict = bytes.withUnsafeBytes { nonces.check($0, client: Self.client, now: Self.issued) }
        #expect(verdict == .invalid)
    }

    @Test("Moving the issue time forward without the key is detected, not taken as fresh")
    func forgedTime() {
        let nonce = nonces.make(for: Self.client, now: Self.issued)
        let forged = "6553f4e8" + nonce.dropFirst(8)  // 1000 s later
        #expect(check(String(forged), now: Self.issued + 1000) == .invalid)
    }

    @Test("Nonces of the wrong length or alphabet are invalid", arguments: [0, 8, 23, 25, 48])
    func wrongLength(length: Int) {
        let nonce = nonces.make(for: Self.client, now: Self.issued)
        let text = String(String(repeating: nonce, count: 2).prefix(length))
        #expect(check(text, now: Self.issued) == .invalid)
    }

    @Test("An upper-case spelling of a nonce is not the nonce")
    func upperCase() {
        let nonce = nonces.make(for: Self.client, now: Self.issued)
        #expect(check(nonce.uppercased(), now: Self.issued) == .invalid)
    }

    @Test("A nonce from a server with another key is invalid")
    func otherKey() {
        let other = NonceGenerator(key: Array(repeating: 7, count: 32), lifetime: 600)
        let nonce = other.make(for: Self.client, now: Self.issued)
        #expect(check(nonce, now: Self.issued) == .invalid)
    }

    @Test("stale-nonce sets the lifetime")
    func configuredLifetime() {
        let short = NonceGenerator(key: Self.key, lifetime: 30)
        let nonce = short.make(for: Self.client, now: Self.issued)
        #expect(
            Array(nonce.utf8).withUnsafeBytes { short.check($0, client: Self.client, now: Self.issued + 29) } == .fresh)
        #expect(
            Array(nonce.utf8).withUnsafeBytes { short.check($0, client: Self.client, now: Self.issued + 30) } == .stale)
    }
}
