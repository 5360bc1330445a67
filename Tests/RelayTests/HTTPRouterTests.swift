import Logging
import Relay
import StunCodec
import Testing

/// Every status the HTTP service answers, through the router (the evhttp glue only reads and
/// writes): 200, 400, 401, 404, 405, 429, 431 and 503; 413 comes from evhttp's body limit.
@Suite struct HTTPRouterTests {
    static let token = "s3cret-t0ken"
    static let auth = ("Authorization", "Bearer \(token)")
    static let now: Int64 = 1_800_000_000

    static func router(
        _ adjust: (inout RelayConfiguration) -> Void = { _ in }, health: ServiceHealth = ready(),
        registry: MetricsRegistry = MetricsRegistry(threads: 2)
    ) -> APIRouter {
        var c = RelayConfiguration()
        c.useAuthSecret = true
        c.staticAuthSecrets = ["north"]
        c.listeningIPs = [IPAddress("198.51.100.7")!]
        c.cert = "/etc/relayd/cert.pem"
        c.apiKeys = [.init(name: "web", token: token), .init(name: "burst", token: "burst-token")]
        adjust(&c)
        return APIRouter(
            credentials: CredentialService(configuration: c), keyring: APIKeyring(keys: c.apiKeys), registry: registry,
            health: health, logger: Logger(label: "relayd.http-tests") { _ in SwiftLogNoOpLogHandler() })
    }

    static func ready() -> ServiceHealth {
        let health = ServiceHealth()
        health.markListening()
        return health
    }

    static func get(
        _ path: String, query: String? = nil, headers: [(String, String)] = [auth], method: HTTPRequest.Method = .get,
        body: String = ""
    ) -> HTTPRequest {
        HTTPRequest(
            method: method, path: path, query: query, headers: headers.map { (name: $0.0, value: $0.1) },
            body: Array(body.utf8), clientIP: "192.0.2.1")
    }

    static func errorCode(_ response: HTTPResponse) -> String? {
        let text = response.bodyText
        guard let start = text.range(of: #"{"error":""#), let end = text[start.upperBound...].firstIndex(of: "\"")
        else { return nil }
        return String(text[start.upperBound..<end])
    }

    @Test("GET with a valid token answers 200 with the credentials as JSON, never cached")
    func issuesCredentials() {
        let router = Self.router()
        let response = router.handle(
            Self.get(APIRouter.credentialsPath, query: "user=alice&ttl=600"), on: .api, now: Self.now, monotonic: 0)
        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "application/json")
        #expect(response.header("Cache-Control") == "no-store")
        let username = "1800000600:alice"
        #expect(
            response.bodyText
                == #"{"username":"\#(username)","password":"\#(KeyDerivation.restPassword(secret: "north", username: username))","#
                + #""ttl":600,"uris":["turn:198.51.100.7:3478?transport=udp","turn:198.51.100.7:3478?transport=tcp","#
                + #""turns:198.51.100.7:5349?transport=tcp"]}"#)
        #expect(router.service.credentials(.issued) == 1)
    }

    @Test("POST takes the same parameters as a JSON body")
    func postJSON() {
        let response = Self.router().handle(
            Self.get(
                APIRouter.credentialsPath, method: .post, body: #"{"user":"bob","ttl":60,"format":"ice-servers"}"#),
            on: .api, now: Self.now, monotonic: 0)
        #expect(response.status == 200)
        #expect(response.bodyText.hasPrefix(#"{"iceServers":[{"urls":["stun:198.51.100.7:3478"]}"#))
        #expect(response.bodyText.contains(#""username":"1800000060:bob""#))
    }

    @Test(
        "A missing or wrong token is 401 with a Bearer challenge and a JSON error",
        arguments: [
            [], [("Authorization", "Bearer wrong")], [("Authorization", "Basic \(token)")],
            [("Authorization", "Bearer \(token)x")],
        ] as [[(String, String)]])
    func unauthorized(headers: [(String, String)]) {
        let router = Self.router()
        let response = router.handle(
            Self.get(APIRouter.credentialsPath, query: "user=alice", headers: headers), on: .api, now: Self.now,
            monotonic: 0)
        #expect(response.status == 401)
        #expect(response.header("WWW-Authenticate") == #"Bearer realm="relayd""#)
        #expect(Self.errorCode(response) == "unauthorized")
        #expect(!response.bodyText.contains(Self.token))
        #expect(router.service.credentials(.unauthorized) == 1)
    }

    @Test("Invalid parameters are 400 with a JSON error saying what is wrong")
    func badRequest() {
        let router = Self.router()
        for query in ["", "user=a:b", "user=a&ttl=0", "user=a&format=x", "user=\(String(repeating: "u", count: 65))"] {
            let response = router.handle(
                Self.get(APIRouter.credentialsPath, query: query), on: .api, now: Self.now, monotonic: 0)
            #expect(response.status == 400, "query \(query)")
            #expect(Self.errorCode(response) == "invalid_request")
        }
        let body = router.handle(
            Self.get(APIRouter.credentialsPath, method: .post, body: "user=alice"), on: .api, now: Self.now,
            monotonic: 0)
        #expect(body.status == 400)
        #expect(router.service.credentials(.badRequest) == 6)
    }

    @Test("Without use-auth-secret an authenticated caller gets 503; an unauthenticated one still 401")
    func unavailable() {
        let router = Self.router { $0.useAuthSecret = false }
        let request = Self.get(APIRouter.credentialsPath, query: "user=alice")
        let response = router.handle(request, on: .api, now: Self.now, monotonic: 0)
        #expect(response.status == 503)
        #expect(Self.errorCode(response) == "credentials_unavailable")
        #expect(
            router.handle(
                Self.get(APIRouter.credentialsPath, query: "user=a", headers: []), on: .api, now: Self.now, monotonic: 0
            )
            .status == 401)
    }

    @Test("Past the burst a key gets 429 with Retry-After; other keys and later requests pass")
    func rateLimited() {
        let router = Self.router()
        let burst = Self.get(
            APIRouter.credentialsPath, query: "user=a", headers: [("Authorization", "Bearer burst-token")])
        for _ in 0..<40 { #expect(router.handle(burst, on: .api, now: Self.now, monotonic: 5).status == 200) }
        let limited = router.handle(burst, on: .api, now: Self.now, monotonic: 5)
        #expect(limited.status == 429)
        #expect(limited.header("Retry-After") == "1")
        #expect(Self.errorCode(limited) == "rate_limited")
        #expect(
            router.handle(Self.get(APIRouter.credentialsPath, query: "user=a"), on: .api, now: Self.now, monotonic: 5)
                .status == 200)
        #expect(router.handle(burst, on: .api, now: Self.now, monotonic: 6).status == 200)
        #expect(router.service.credentials(.rateLimited) == 1)
    }

    @Test("Unauthenticated callers are limited per client IP, so tokens cannot be guessed at speed")
    func unauthenticatedRateLimited() {
        let router = Self.router()
        let guess = Self.get(APIRouter.credentialsPath, query: "user=a", headers: [("Authorization", "Bearer guess")])
        var statuses: [Int] = []
        for _ in 0..<41 { statuses.append(router.handle(guess, on: .api, now: Self.now, monotonic: 9).status) }
        #expect(statuses.dropLast().allSatisfy { $0 == 401 })
        #expect(statuses.last == 429)
    }

    @Test("Header sections above 8 KiB are 431")
    func headersTooLarge() {
        let big = Self.get(
            APIRouter.credentialsPath, query: "user=a",
            headers: [Self.auth, ("X-Padding", String(repeating: "p", count: 9000))])
        let response = Self.router().handle(big, on: .api, now: Self.now, monotonic: 0)
        #expect(response.status == 431)
        #expect(Self.errorCode(response) == "request_header_fields_too_large")
    }

    @Test("Unknown paths are 404; the Prometheus listener serves no credentials")
    func notFound() {
        let router = Self.router()
        for path in ["/", "/api/v1/credential", "/api/v1/credentials/", "/api/v2/credentials", "/metrics/x"] {
            #expect(router.handle(Self.get(path), on: .api, now: Self.now, monotonic: 0).status == 404, "\(path)")
        }
        #expect(
            router.handle(
                Self.get(APIRouter.credentialsPath, query: "user=a"), on: .prometheus, now: Self.now, monotonic: 0
            )
            .status == 404)
    }

    @Test(
        "A method the path does not take is 405 with an Allow header",
        arguments: [
            (APIRouter.credentialsPath, HTTPRequest.Method.put, "GET, POST"),
            (APIRouter.credentialsPath, .delete, "GET, POST"),
            (APIRouter.credentialsPath, .head, "GET, POST"), ("/metrics", .post, "GET, HEAD"),
            ("/healthz", .delete, "GET, HEAD"),
            ("/readyz", .options, "GET, HEAD"),
        ])
    func methodNotAllowed(path: String, method: HTTPRequest.Method, allow: String) {
        let response = Self.router().handle(Self.get(path, method: method), on: .api, now: Self.now, monotonic: 0)
        #expect(response.status == 405)
        #expect(response.header("Allow") == allow)
        #expect(Self.errorCode(response) == "method_not_allowed")
    }

    @Test("/metrics is served on both listeners in the Prometheus text format, without authentication")
    func metrics() {
        let router = Self.router()
        for listener in [APIRouter.Listener.api, .prometheus] {
            let response = router.handle(Self.get("/metrics", headers: []), on: listener, now: Self.now, monotonic: 0)
            #expect(response.status == 200)
            #expect(response.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
            #expect(response.bodyText.contains("relayd_loop_threads 2\n"))
        }
    }

    @Test("/healthz is 200 while the process runs; /readyz only once listening and not draining")
    func health() {
        let health = ServiceHealth()
        let router = Self.router(health: health)
        let healthz = router.handle(Self.get("/healthz", headers: []), on: .api, now: Self.now, monotonic: 0)
        #expect(healthz.status == 200)
        #expect(healthz.bodyText == "ok\n")
        #expect(router.handle(Self.get("/readyz", headers: []), on: .api, now: Self.now, monotonic: 0).status == 503)
        health.markListening()
        #expect(router.handle(Self.get("/readyz", headers: []), on: .api, now: Self.now, monotonic: 0).status == 200)
        health.setDraining(true)
        #expect(router.handle(Self.get("/readyz", headers: []), on: .api, now: Self.now, monotonic: 0).status == 503)
        #expect(router.handle(Self.get("/healthz", headers: []), on: .api, now: Self.now, monotonic: 0).status == 200)
    }

    @Test("Query strings decode + and percent escapes as UTF-8; bad escapes are refused")
    func queryString() throws {
        let pairs = try #require(QueryString.parse("a=1&b=x+y&c=%E2%9C%93&d&&e="))
        #expect(pairs.map(\.name) == ["a", "b", "c", "d", "e"])
        #expect(pairs.map(\.value) == ["1", "x y", "✓", "", ""])
        #expect(QueryString.parse("a=%2") == nil)
        #expect(QueryString.parse("a=%G0") == nil)
    }
}
