import Relay
import RelayCore
import StunCodec
import Testing

/// Long-term credentials (RFC 8489 §9.2.2) from static users and TURN REST usernames
/// (coturn `use-auth-secret`, draft-uberti-behave-turn-rest-00 §2.2).
@Suite struct CredentialStoreTests {
    private static let realm = "example.org"
    private static let now: Int64 = 1_700_000_000

    private static func store(_ adjust: (inout RelayConfiguration) -> Void = { _ in }) -> CredentialStore {
        var c = RelayConfiguration()
        c.realm = realm
        c.useAuthSecret = true
        c.staticAuthSecrets = ["secret-new", "secret-old"]
        adjust(&c)
        return CredentialStore(configuration: c)
    }

    private static func restKey(_ username: String, secret: String) -> [UInt8] {
        KeyDerivation.longTermKeyMD5(
            username: username, realm: realm, password: KeyDerivation.restPassword(secret: secret, username: username))
    }

    @Test(
        "During a secret rotation a password minted under either secret works", arguments: ["secret-new", "secret-old"])
    func rotation(secret: String) throws {
        let username = "\(Self.now + 3600):alice"
        let keys = try Self.store().candidateKeys(for: username, now: Self.now).get()
        #expect(keys.count == 2)
        #expect(keys.contains(Self.restKey(username, secret: secret)))
        #expect(!keys.contains(Self.restKey(username, secret: "secret-gone")))
    }

    @Test("The REST password is base64(HMAC-SHA1(secret, username))")
    func restPasswordShape() {
        let password = KeyDerivation.restPassword(secret: "secret-new", username: "1700003600:alice")
        #expect(password.utf8.count == 28)
        #expect(password.hasSuffix("="))
    }

    @Test(
        "rest-api-separator splits the expiry from the user id",
        arguments: [
            (":", "1700003600:alice", "alice"), ("_", "1700003600_alice", "alice"), ("-", "1700003600-a:b", "a:b"),
            (":", "1700003600", "1700003600"),
        ])
    func separator(separator: String, username: String, user: String) throws {
        let store = Self.store { $0.restAPISeparator = separator }
        let keys = try store.candidateKeys(for: username, now: Self.now).get()
        #expect(keys.first == Self.restKey(username, secret: "secret-new"))
        #expect(store.userID(of: username) == Substring(user))
    }

    @Test("A REST username whose expiry is now or past is expired", arguments: [0, -1, -86_400] as [Int64])
    func expired(offset: Int64) {
        let username = "\(Self.now + offset):alice"
        #expect(Self.store().candidateKeys(for: username, now: Self.now) == .failure(.expired))
    }

    @Test(
        "Malformed REST usernames are unknown users",
        arguments: [
            "alice", "", ":alice", "alice:1700003600", "17000x3600:alice", "-1700003600:alice", "+1700003600:alice",
            " 1700003600:alice", "99999999999999999999:alice", "１７００００３６００:alice", "0x65:alice",
        ])
    func malformed(username: String) {
        #expect(Self.store().candidateKeys(for: username, now: Self.now) == .failure(.unknownUser))
    }

    @Test("Without use-auth-secret a REST-looking username is an unknown user")
    func restDisabled() {
        let store = Self.store { $0.useAuthSecret = false }
        #expect(store.candidateKeys(for: "\(Self.now + 3600):alice", now: Self.now) == .failure(.unknownUser))
        #expect(store.userID(of: "\(Self.now + 3600):alice") == "\(Self.now + 3600):alice")
    }

    @Test("A static user's key is MD5(username \":\" realm \":\" password)")
    func staticPassword() throws {
        let store = Self.store { $0.users = [.init(name: "bob", credential: .password("bob-password"))] }
        let keys = try store.candidateKeys(for: "bob", now: Self.now).get()
        #expect(keys == [KeyDerivation.longTermKeyMD5(username: "bob", realm: Self.realm, password: "bob-password")])
        #expect(store.userID(of: "bob") == "bob")
    }

    @Test("A static user given as 0x<key> uses that key as is")
    func staticKey() throws {
        let key: [UInt8] = [
            0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF,
        ]
        let store = Self.store { $0.users = [.init(name: "carol", credential: .key(key))] }
        #expect(try store.candidateKeys(for: "carol", now: Self.now).get() == [key])
    }

    @Test("A static user whose name looks like a REST username is still the static user")
    func staticWinsOverRest() throws {
        let name = "\(Self.now + 3600):dave"
        let store = Self.store { $0.users = [.init(name: name, credential: .password("pw"))] }
        let keys = try store.candidateKeys(for: name, now: Self.now).get()
        #expect(keys == [KeyDerivation.longTermKeyMD5(username: name, realm: Self.realm, password: "pw")])
    }

    @Test("Static passwords are prepared with OpaqueString before hashing (RFC 8489 §9.2.2, RFC 8265 §4.2)")
    func opaqueString() throws {
        // RFC 5769 §2.4: "The<U+00AD>M<U+00AA>tr<U+2168>" prepares to "TheMatrIX".
        let user = "\u{30DE}\u{30C8}\u{30EA}\u{30C3}\u{30AF}\u{30B9}"
        let store = Self.store {
            $0.users = [.init(name: user, credential: .password("The\u{00AD}M\u{00AA}tr\u{2168}"))]
        }
        let keys = try store.candidateKeys(for: user, now: Self.now).get()
        #expect(keys == [KeyDerivation.longTermKeyMD5(username: user, realm: Self.realm, password: "TheMatrIX")])
    }

    @Test("An unknown static user with REST off is an unknown user")
    func unknownStatic() {
        let store = Self.store {
            $0.useAuthSecret = false
            $0.users = [.init(name: "bob", credential: .password("x"))]
        }
        #expect(store.candidateKeys(for: "mallory", now: Self.now) == .failure(.unknownUser))
    }
}
