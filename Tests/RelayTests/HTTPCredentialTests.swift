import Relay
import RelayCore
import StunCodec
import Testing

/// The credential service mints coturn TURN REST credentials (docs/compatibility.md) and answers in the three
/// shapes clients already parse, byte for byte.
@Suite struct HTTPCredentialTests {
    /// docs/compatibility.md's vector: secret `north`, `4102444800:alice` -> `58Tl4e2VjINId23vxEnD/7NNBaQ=`.
    static let vectorExpiry: Int64 = 4_102_444_800
    static let vectorPassword = "58Tl4e2VjINId23vxEnD/7NNBaQ="

    static func configuration(_ adjust: (inout RelayConfiguration) -> Void = { _ in }) -> RelayConfiguration {
        var c = RelayConfiguration()
        c.useAuthSecret = true
        c.staticAuthSecrets = ["north", "south"]
        c.realm = "example.org"
        c.listeningIPs = [IPAddress("198.51.100.7")!]
        c.cert = "/etc/relayd/cert.pem"
        adjust(&c)
        return c
    }

    static func issue(
        _ request: CredentialRequest, now: Int64 = vectorExpiry - 3600,
        _ adjust: (inout RelayConfiguration) -> Void = { _ in }
    ) throws -> IssuedCredentials {
        try #require(CredentialService(configuration: configuration(adjust)).issue(request, now: now))
    }

    @Test("The rest shape is draft-uberti-behave-turn-rest's username, password, ttl, uris (TURN URIs only)")
    func restShape() throws {
        let issued = try Self.issue(CredentialRequest(user: "alice", ttl: 3600, format: .rest))
        #expect(
            issued.json(.rest)
                == #"{"username":"4102444800:alice","password":"58Tl4e2VjINId23vxEnD/7NNBaQ=","ttl":3600,"uris":["#
                + #""turn:198.51.100.7:3478?transport=udp","turn:198.51.100.7:3478?transport=tcp","#
                + #""turns:198.51.100.7:5349?transport=tcp"]}"#)
    }

    @Test("The ice-servers shape is RTCConfiguration.iceServers: a STUN entry, then the TURN entry with credentials")
    func iceServersShape() throws {
        let issued = try Self.issue(CredentialRequest(user: "alice", ttl: 3600, format: .iceServers))
        #expect(
            issued.json(.iceServers)
                == #"{"iceServers":[{"urls":["stun:198.51.100.7:3478"]},{"urls":["#
                + #""turn:198.51.100.7:3478?transport=udp","turn:198.51.100.7:3478?transport=tcp","#
                + #""turns:198.51.100.7:5349?transport=tcp"],"username":"4102444800:alice","#
                + #""credential":"58Tl4e2VjINId23vxEnD/7NNBaQ="}]}"#)
    }

    @Test("The webrtckit shape is the same with urlStrings, as RTCIceServer(urlStrings:username:credential:) takes")
    func webrtcKitShape() throws {
        let issued = try Self.issue(CredentialRequest(user: "alice", ttl: 3600, format: .webrtcKit))
        #expect(
            issued.json(.webrtcKit)
                == #"{"iceServers":[{"urlStrings":["stun:198.51.100.7:3478"]},{"urlStrings":["#
                + #""turn:198.51.100.7:3478?transport=udp","turn:198.51.100.7:3478?transport=tcp","#
                + #""turns:198.51.100.7:5349?transport=tcp"],"username":"4102444800:alice","#
                + #""credential":"58Tl4e2VjINId23vxEnD/7NNBaQ="}]}"#)
    }

    @Test("JSON strings escape quotes, backslashes and control characters (RFC 8259 §7)")
    func jsonEscaping() {
        #expect(JSONWriter.quoted("a\"b\\c\nd\u{01}é/") == #""a\"b\\c\nd\u0001é/""#)
    }

    @Test("The password is the first static-auth-secret's, so relayd's own credential check accepts it")
    func relaydAcceptsTheCredential() throws {
        let issued = try Self.issue(CredentialRequest(user: "alice", ttl: 600))
        #expect(issued.password == KeyDerivation.restPassword(secret: "north", username: issued.username))
        let store = CredentialStore(configuration: Self.configuration())
        let keys = try store.candidateKeys(for: issued.username, now: Self.vectorExpiry - 3600).get()
        #expect(
            keys.contains(
                KeyDerivation.longTermKeyMD5(username: issued.username, realm: "example.org", password: issued.password)
            ))
        #expect(throws: CredentialStore.Failure.expired) {
            try store.candidateKeys(for: issued.username, now: Self.vectorExpiry - 3000).get()
        }
    }

    @Test("Without a ttl the credential lives credential-ttl; above credential-max-ttl it is capped")
    func ttlDefaultAndCap() throws {
        let now: Int64 = 1_800_000_000
        let byDefault = try Self.issue(CredentialRequest(user: "u"), now: now) { $0.credentialTTL = 1234 }
        #expect(byDefault.ttl == 1234)
        #expect(byDefault.username == "1800001234:u")
        let capped = try Self.issue(CredentialRequest(user: "u", ttl: Int.max), now: now) { $0.credentialMaxTTL = 7200 }
        #expect(capped.ttl == 7200)
        #expect(capped.username == "1800007200:u")
    }

    @Test("The username uses rest-api-separator")
    func separator() throws {
        let issued = try Self.issue(CredentialRequest(user: "alice", ttl: 3600)) { $0.restAPISeparator = "@" }
        #expect(issued.username == "4102444800@alice")
    }

    @Test("Without use-auth-secret or a static-auth-secret the service is unavailable")
    func unavailable() {
        let off = CredentialService(configuration: Self.configuration { $0.useAuthSecret = false })
        #expect(!off.isAvailable)
        #expect(off.issue(CredentialRequest(user: "a"), now: 0) == nil)
        let noSecret = CredentialService(configuration: Self.configuration { $0.staticAuthSecrets = [] })
        #expect(!noSecret.isAvailable)
    }

    // MARK: Parameters

    @Test(
        "Query parameters are validated: user 1-64 characters without separator or controls, ttl a positive integer, a known format",
        arguments: [
            ("", CredentialRequest.Invalid.missingUser),
            ("user=", .missingUser),
            ("ttl=60", .missingUser),
            ("user=\(String(repeating: "x", count: 65))", .userTooLong),
            ("user=a:b", .userContainsSeparator),
            ("user=a%3Ab", .userContainsSeparator),
            ("user=a%0Ab", .userContainsControlCharacter),
            ("user=a%7Fb", .userContainsControlCharacter),
            ("user=a%C2%85b", .userContainsControlCharacter),
            ("user=a%E2%80%8Bb", .userNotOpaqueString),
            ("user=\(String(repeating: "e%CC%81%CC%81", count: 64))", .userTooLong),
            ("user=a%EF%BF%BFb", .userNotOpaqueString),
            ("user=a&ttl=0", .invalidTTL),
            ("user=a&ttl=-5", .invalidTTL),
            ("user=a&ttl=abc", .invalidTTL),
            ("user=a&ttl=1e3", .invalidTTL),
            ("user=a&ttl=+5", .invalidTTL),
            ("user=a&ttl=", .invalidTTL),
            ("user=a&format=json", .unknownFormat),
            ("user=a&format=REST", .unknownFormat),
            ("user=a&user=b", .repeatedParameter("user")),
            ("user=%zz", .malformedQuery),
            ("user=%FF", .malformedQuery),
        ])
    func invalidQuery(query: String, expected: CredentialRequest.Invalid) {
        #expect(throws: expected) { try CredentialRequest.fromQuery(query, separator: ":") }
    }

    @Test("A valid query gives the user, ttl and format; other parameters are node labels to prefer")
    func validQuery() throws {
        #expect(
            try CredentialRequest.fromQuery("user=alice&ttl=600&format=ice-servers&x=1", separator: ":")
                == CredentialRequest(
                    user: "alice", ttl: 600, format: .iceServers, labels: [NodeLabel(key: "x", value: "1")]))
        #expect(
            try CredentialRequest.fromQuery("user=J%C3%BCrgen+K", separator: ":")
                == CredentialRequest(user: "Jürgen K", ttl: nil, format: .rest))
        #expect(
            try CredentialRequest.fromQuery(
                "user=\(String(repeating: "é", count: 64))&format=webrtckit", separator: ":"
            ).format
                == .webrtcKit)
        #expect(try CredentialRequest.fromQuery("user=a&ttl=99999999999999999999999", separator: ":").ttl == Int.max)
        #expect(try CredentialRequest.fromQuery("user=a:b", separator: "@").user == "a:b")
    }

    @Test(
        "The POST body is a JSON object with user, ttl (integer or digits) and format",
        arguments: [
            (
                #"{"user":"alice","ttl":600,"format":"webrtckit"}"#,
                CredentialRequest(user: "alice", ttl: 600, format: .webrtcKit)
            ),
            (#"{"user":"alice","ttl":"600"}"#, CredentialRequest(user: "alice", ttl: 600)),
            (#"{"user":"alice","extra":[1,2]}"#, CredentialRequest(user: "alice")),
            (#"{"user":"alice","ttl":null}"#, CredentialRequest(user: "alice")),
        ])
    func validBody(body: String, expected: CredentialRequest) throws {
        #expect(try CredentialRequest.fromJSON(Array(body.utf8), separator: ":") == expected)
    }

    @Test(
        "A malformed or invalid POST body is refused",
        arguments: [
            ("", CredentialRequest.Invalid.malformedBody),
            ("not json", .malformedBody),
            (#"["alice"]"#, .malformedBody),
            (#"{"user":42}"#, .malformedBody),
            (#"{"user":"alice","ttl":true}"#, .malformedBody),
            (#"{"user":"alice","ttl":3.5}"#, .malformedBody),
            (#"{}"#, .missingUser),
            (#"{"user":""}"#, .missingUser),
            (#"{"user":"alice","ttl":0}"#, .invalidTTL),
            (#"{"user":"alice","ttl":-1}"#, .invalidTTL),
            (#"{"user":"alice","ttl":"1h"}"#, .invalidTTL),
            (#"{"user":"alice","format":"xml"}"#, .unknownFormat),
            (#"{"user":"a:b"}"#, .userContainsSeparator),
            (#"{"user":"a\u0000b"}"#, .userContainsControlCharacter),
        ])
    func invalidBody(body: String, expected: CredentialRequest.Invalid) {
        #expect(throws: expected) { try CredentialRequest.fromJSON(Array(body.utf8), separator: ":") }
    }

    // MARK: URIs

    @Test("Derived URIs use the first external-ip's public address over any listening-ip")
    func externalIPFirst() {
        let uris = ICEServerURIs(
            configuration: Self.configuration {
                $0.externalIPs = [.init(publicIP: IPAddress("203.0.113.9")!, privateIP: IPAddress("10.0.0.5")!)]
                $0.listeningPort = 3479
                $0.tlsListeningPort = 443
            })
        #expect(uris.stun == ["stun:203.0.113.9:3479"])
        #expect(
            uris.turn == [
                "turn:203.0.113.9:3479?transport=udp", "turn:203.0.113.9:3479?transport=tcp",
                "turns:203.0.113.9:443?transport=tcp",
            ])
    }

    @Test("Wildcard listening-ips are skipped and IPv6 hosts are bracketed (RFC 3986 §3.2.2)")
    func ipv6Bracketed() {
        let uris = ICEServerURIs(
            configuration: Self.configuration { $0.listeningIPs = [.ipv4Any, .ipv6Any, IPAddress("2001:db8::1")!] })
        #expect(uris.stun == ["stun:[2001:db8::1]:3478"])
        #expect(uris.turn.first == "turn:[2001:db8::1]:3478?transport=udp")
    }

    @Test("Without a usable listening-ip the first non-loopback interface address is used")
    func interfaceFallback() {
        let c = Self.configuration { $0.listeningIPs = [.ipv4Any] }
        let uris = ICEServerURIs(configuration: c, interfaceAddresses: [.ipv4Loopback, IPAddress("192.0.2.10")!])
        #expect(uris.stun == ["stun:192.0.2.10:3478"])
        #expect(ICEServerURIs(configuration: c, interfaceAddresses: [.ipv4Loopback]).stun == ["stun:127.0.0.1:3478"])
    }

    @Test(
        "no-udp, no-tcp, no-tls, stun-only and no-stun leave out the URIs they disable",
        arguments: [
            ("no-udp", [], ["turn:198.51.100.7:3478?transport=tcp", "turns:198.51.100.7:5349?transport=tcp"]),
            (
                "no-tcp", ["stun:198.51.100.7:3478"],
                ["turn:198.51.100.7:3478?transport=udp", "turns:198.51.100.7:5349?transport=tcp"]
            ),
            (
                "no-tls", ["stun:198.51.100.7:3478"],
                ["turn:198.51.100.7:3478?transport=udp", "turn:198.51.100.7:3478?transport=tcp"]
            ),
            ("stun-only", ["stun:198.51.100.7:3478"], []),
            (
                "no-stun", [],
                [
                    "turn:198.51.100.7:3478?transport=udp", "turn:198.51.100.7:3478?transport=tcp",
                    "turns:198.51.100.7:5349?transport=tcp",
                ]
            ),
        ] as [(String, [String], [String])])
    func disabledListeners(flag: String, stun: [String], turn: [String]) {
        let uris = ICEServerURIs(
            configuration: Self.configuration {
                switch flag {
                case "no-udp": $0.noUDP = true
                case "no-tcp": $0.noTCP = true
                case "no-tls": $0.noTLS = true
                case "stun-only": $0.stunOnly = true
                default: $0.noStun = true
                }
            })
        #expect(uris == ICEServerURIs(stun: stun, turn: turn))
    }

    @Test("Without a cert there is no TLS listener, so no turns: URI")
    func noCertNoTurns() {
        let uris = ICEServerURIs(configuration: Self.configuration { $0.cert = nil })
        #expect(uris.turn == ["turn:198.51.100.7:3478?transport=udp", "turn:198.51.100.7:3478?transport=tcp"])
    }

    @Test("advertised-uri values replace the derived ones, split into STUN and TURN entries by scheme")
    func advertisedURIs() throws {
        let c = Self.configuration {
            $0.advertisedURIs = [
                "stun:stun.example.org", "turn:turn.example.org?transport=udp",
                "turns:turn.example.org:443?transport=tcp",
            ]
        }
        let uris = ICEServerURIs(configuration: c)
        #expect(uris.stun == ["stun:stun.example.org"])
        #expect(uris.turn == ["turn:turn.example.org?transport=udp", "turns:turn.example.org:443?transport=tcp"])
        let issued = try #require(
            CredentialService(configuration: c).issue(CredentialRequest(user: "a", ttl: 60), now: 100))
        #expect(
            issued.json(.rest).hasSuffix(
                #""uris":["turn:turn.example.org?transport=udp","turns:turn.example.org:443?transport=tcp"]}"#))
    }
}
