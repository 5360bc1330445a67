import StunCodec
import Testing

@Suite("TURN REST credentials, Base64 and long-term keys")
struct RESTCredentialTests {
    @Test(
        "coturn use-auth-secret vectors (docs/compatibility.md)",
        arguments: [
            ("4102444800:alice", "58Tl4e2VjINId23vxEnD/7NNBaQ="),
            ("1700000000:alice", "Cd/49soE35ICqcJF/bCTn8Z4OyE="),
        ])
    func restPassword(username: String, password: String) {
        #expect(KeyDerivation.restPassword(secret: "north", username: username) == password)
        #expect(KeyDerivation.restPassword(secret: "south", username: username) != password)
    }

    @Test("The REST password is base64 of the 20-byte HMAC-SHA1")
    func restPasswordIsHMAC() throws {
        let password = KeyDerivation.restPassword(secret: "north", username: "4102444800:alice")
        let mac = try #require(Base64.decode(password))
        #expect(mac == DigestAlgorithm.sha1.hmac(key: Array("north".utf8), message: Array("4102444800:alice".utf8)))
    }

    @Test(
        "RFC 4648 §10 Base64 vectors",
        arguments: [
            ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ])
    func base64Vectors(plain: String, encoded: String) {
        #expect(Base64.encode(Array(plain.utf8)) == encoded)
        #expect(Base64.decode(encoded) == Array(plain.utf8))
    }

    @Test("Base64 round trip of every length 0–64 and every byte value")
    func base64RoundTrip() {
        for length in 0...64 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ length) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes, "length \(length)")
        }
        let all = (0...255).map(UInt8.init)
        #expect(Base64.decode(Base64.encode(all)) == all)
    }

    @Test(
        "Base64 rejects what is not padded base64",
        arguments: [
            "Zg=", "Zg", "Z===", "====", "=Zg=", "Zm=v", "Zg==Zg==", "Zm9v!", "Zm 9v", "Zm9v\n", "Zm9-", "Zm9_",
            "Zm9vYmFy=",
        ])
    func base64Rejects(text: String) {
        #expect(Base64.decode(text) == nil)
    }

    @Test("RFC 5769 §2.4 long-term key: MD5(username:realm:prepared password)")
    func longTermKey() throws {
        let key = KeyDerivation.longTermKeyMD5(
            username: RFC5769.longTermUsername, realm: RFC5769.longTermRealm, password: "TheMatrIX")
        #expect(key == hex("e8ca7ad59d5eb0518e312911d2dab2a9"))
        try withMessage(RFC5769.longTermRequest) { m throws in #expect(m.verifyIntegrity(key: key) == .valid) }
    }

    @Test("The unprepared §2.4 password gives another key: preparation happens before the codec")
    func unpreparedPassword() {
        let key = KeyDerivation.longTermKeyMD5(
            username: RFC5769.longTermUsername, realm: RFC5769.longTermRealm,
            password: RFC5769.longTermPasswordUnprepared)
        #expect(key != RFC5769.longTermKey)
    }

    @Test("A REST credential's long-term key authenticates a message built with it")
    func restCredentialEndToEnd() throws {
        let username = "4102444800:alice"
        let password = KeyDerivation.restPassword(secret: "north", username: username)
        let key = KeyDerivation.longTermKeyMD5(username: username, realm: "relayd.example", password: password)
        #expect(key.count == 16)
        let message = try buildMessage(MessageType(method: .allocate, messageClass: .request)) { w in
            try w.append(Username(value: username))
            try w.append(Realm(value: "relayd.example"))
            try key.withUnsafeBytes { k in try w.appendMessageIntegrity(key: k) }
        }
        try withMessage(message) { m throws in
            #expect(try m.decode(Username.self)?.value == username)
            #expect(m.verifyIntegrity(key: key) == .valid)
        }
    }

    @Test("SHA-256 long-term key is SHA-256(username:realm:password) (RFC 8489 §9.2.2)")
    func sha256Key() {
        let key = KeyDerivation.longTermKeySHA256(
            username: Array("user".utf8), realm: Array("realm".utf8), password: Array("pass".utf8))
        #expect(key == DigestAlgorithm.sha256.hash(Array("user:realm:pass".utf8)))
        #expect(key.count == 32)
    }
}
