import StunCodec
import Testing

/// RFC 8489 Appendix B.1: a request with long-term authentication, MESSAGE-INTEGRITY-SHA256 and
/// USERHASH, as corrected by erratum 6268 (the published bytes lack the PASSWORD-ALGORITHM
/// attribute the key depends on). Username "マトリックス" (U+30DE U+30C8 U+30EA U+30C3 U+30AF
/// U+30B9), password "TheMatrIX", realm "example.org"; the key is
/// SHA-256(username ":" realm ":" password).
@Suite("RFC 8489 Appendix B.1 test vector")
struct RFC8489VectorTests {
    static let username = "\u{30DE}\u{30C8}\u{30EA}\u{30C3}\u{30AF}\u{30B9}"
    static let realm = "example.org"
    static let nonce = "obMatJos2AAACf//499k954d6OL34oL9FSTvy64sA"
    static let transactionID: [UInt8] = [0x78, 0xad, 0x34, 0x33, 0xc6, 0xad, 0x72, 0xc0, 0x29, 0xda, 0x41, 0x2e]
    static let request = hex("""
        00 01 00 90 21 12 a4 42 78 ad 34 33 c6 ad 72 c0 29 da 41 2e
        00 1e 00 20 4a 3c f3 8f ef 69 92 bd a9 52 c6 78 04 17 da 0f 24 81 94 15 56 9e 60 b2 05 c4 6e 41 40 7f 17 04
        00 15 00 29 6f 62 4d 61 74 4a 6f 73 32 41 41 41 43 66 2f 2f 34 39 39 6b 39 35 34 64 36 4f 4c 33 34 6f 4c 39
        46 53 54 76 79 36 34 73 41 00 00 00
        00 14 00 0b 65 78 61 6d 70 6c 65 2e 6f 72 67 00
        00 1d 00 04 00 02 00 00
        00 1c 00 20 b5 c7 bf 00 5b 6c 52 a2 1c 51 c5 e8 92 f8 19 24 13 62 96 cb 92 7c 43 14 93 09 27 8c c6 51 8e 65
        """)

    static var key: [UInt8] {
        KeyDerivation.longTermKeySHA256(
            username: Array(username.utf8), realm: Array(realm.utf8), password: Array("TheMatrIX".utf8))
    }

    @Test("It parses: USERHASH is SHA-256(username \":\" realm), the nonce cookie announces no feature, PASSWORD-ALGORITHM is SHA-256")
    func parses() throws {
        try Self.request.withUnsafeBytes { bytes in
            let m = try StunMessage(parsing: bytes)
            #expect(m.type == .bindingRequest)
            let userhash = try #require(try m.decode(Userhash.self))
            #expect(userhash.bytes == DigestAlgorithm.sha256.hash(Array(Self.username.utf8) + [0x3A] + Array(Self.realm.utf8)))
            #expect(try m.decode(Nonce.self)?.value == Self.nonce)
            #expect(try m.decode(Realm.self)?.value == Self.realm)
            #expect(try m.decode(PasswordAlgorithm.self) == .sha256)
            #expect(m.integrityOffset == nil && m.integritySHA256Offset != nil)
        }
    }

    @Test("MESSAGE-INTEGRITY-SHA256 verifies under the SHA-256 key, not under the MD5 one")
    func verifies() throws {
        try Self.request.withUnsafeBytes { bytes in
            let m = try StunMessage(parsing: bytes)
            #expect(m.verifyIntegrity(key: Self.key) == .valid)
            let md5 = KeyDerivation.longTermKeyMD5(username: Self.username, realm: Self.realm, password: "TheMatrIX")
            #expect(m.verifyIntegrity(key: md5) == .invalid)
        }
    }

    @Test("The writer produces the same bytes")
    func encodes() throws {
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = try buffer.withUnsafeMutableBytes { raw in
            let id = Self.transactionID.withUnsafeBytes { TransactionID(bytes: $0) }
            var w = try StunMessageWriter(into: raw, type: .bindingRequest, transactionID: id)
            try w.append(
                Userhash(bytes: DigestAlgorithm.sha256.hash(Array(Self.username.utf8) + [0x3A] + Array(Self.realm.utf8))))
            try w.append(Nonce(value: Self.nonce))
            try w.append(Realm(value: Self.realm))
            try w.append(PasswordAlgorithm.sha256)
            try w.appendMessageIntegritySHA256(key: Self.key)
            return w.count
        }
        #expect(Array(buffer[0..<count]) == Self.request)
    }
}
