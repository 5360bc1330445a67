import Testing

@testable import RelayCore

/// An allocation's USERNAME and key, kept inside it (`StoredUsername`, `StoredKey`): what goes
/// in comes back exactly, and a username matches only itself.
@Suite struct StoredCredentialTests {
    static let usernames = [
        "1764400000:alice", "0:a", "007:x", "alice", ":x", "12345678901234567890:u", "123456789012345678:u",
        "123:", "123:a:b", "-5:a", "12a:b", "1764400000:ünïcødé-user", "1764400000:" + String(repeating: "u", count: 40),
        "", "1764400000",
    ]

    @Test("Every username comes back as it was", arguments: usernames)
    func roundTrip(username: String) {
        #expect(StoredUsername(username).string == username)
    }

    @Test("A username matches itself and no other of the list")
    func matches() {
        for a in Self.usernames {
            let stored = StoredUsername(a)
            for b in Self.usernames { #expect(stored.matches(b) == (a == b), "\(a) against \(b)") }
        }
        // Expiries that read as the same number are still other usernames.
        #expect(!StoredUsername("5:a").matches("05:a"))
        #expect(!StoredUsername("05:a").matches("5:a"))
    }

    @Test("A key of 0, 16 or 32 bytes comes back as it was; more than 32 is cut at 32", arguments: [0, 1, 16, 32, 40])
    func key(count: Int) {
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        #expect(StoredKey(bytes).bytes == Array(bytes.prefix(32)))
    }
}
