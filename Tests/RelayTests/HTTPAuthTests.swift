import Relay
import Testing

/// Callers of the credential service present `Authorization: Bearer <token>` (RFC 6750 §2.1);
/// tokens are compared in constant time against every `api-key=name:token`.
@Suite struct HTTPAuthTests {
    static let keyring = APIKeyring(keys: [
        .init(name: "web", token: "w3b-t0ken"), .init(name: "ios", token: "10s-t0ken-longer"),
    ])

    @Test(
        "The bearer token is read from the header; the scheme is case-insensitive",
        arguments: [
            ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER  abc  ", "abc"), ("  Bearer\tabc", "abc"),
            ("Bearer a b", "a b"),
        ])
    func bearerToken(header: String, token: String) {
        #expect(APIKeyring.bearerToken(header) == Substring(token))
    }

    @Test(
        "Other schemes and empty tokens carry no bearer token",
        arguments: ["Basic abc", "Bearer", "Bearer   ", "", "Bearerabc", "Token abc"])
    func noBearerToken(header: String) {
        #expect(APIKeyring.bearerToken(header) == nil)
    }

    @Test("A configured token authenticates as its key's name")
    func validTokens() {
        #expect(Self.keyring.authenticate(authorization: "Bearer w3b-t0ken") == "web")
        #expect(Self.keyring.authenticate(authorization: "Bearer 10s-t0ken-longer") == "ios")
    }

    @Test(
        "A wrong, truncated, extended or differently-cased token, or none, authenticates as nobody",
        arguments: [
            "Bearer w3b-t0ke", "Bearer w3b-t0kenX", "Bearer W3B-T0KEN", "Bearer ", "Basic w3b-t0ken", "w3b-t0ken",
            "Bearer 10s-t0ken", "Bearer w3b-t0ken,10s-t0ken-longer",
        ])
    func invalidTokens(header: String) {
        #expect(Self.keyring.authenticate(authorization: header) == nil)
    }

    @Test("Without a header, or with no keys configured, nobody is authenticated")
    func nothingConfigured() {
        #expect(Self.keyring.authenticate(authorization: nil) == nil)
        let empty = APIKeyring(keys: [])
        #expect(empty.isEmpty)
        #expect(empty.authenticate(authorization: "Bearer ") == nil)
        #expect(empty.authenticate(token: "") == nil)
    }
}
