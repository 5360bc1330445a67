@testable import Relay
import RelayCore
import StunCodec
import Testing

/// The status page's routes through the router (docs/admin.md): login, cookie, logout, scopes,
/// and a page whose numbers come from the metrics registry.
@Suite struct HTTPStatusPageTests {
    static func login(_ router: APIRouter, token: String) -> HTTPResponse {
        router.handle(
            HTTPRequest(method: .post, path: "/status/login", body: Array("token=\(token)".utf8), clientIP: "192.0.2.1"),
            on: .api, now: HTTPRouterTests.now, monotonic: 1)
    }

    static func page(_ router: APIRouter, cookie: String? = nil, bearer: String? = nil, monotonic: Double = 2)
        -> HTTPResponse
    {
        var headers: [(name: String, value: String)] = []
        if let cookie { headers.append(("Cookie", "theme=dark; \(cookie)")) }
        if let bearer { headers.append(("Authorization", "Bearer \(bearer)")) }
        return router.handle(
            HTTPRequest(method: .get, path: "/status", headers: headers), on: .api, now: HTTPRouterTests.now,
            monotonic: monotonic)
    }

    static func cookie(_ response: HTTPResponse) -> String? {
        response.header("Set-Cookie").map { String($0.prefix { $0 != ";" }) }
    }

    @Test("The login form sets an HttpOnly SameSite=Strict cookie for an admin token; the page needs it")
    func loginFlow() throws {
        let (router, server) = HTTPAdminTests.setUp()
        defer { withExtendedLifetime(server) {} }
        let form = Self.page(router)
        #expect(form.status == 401 && form.bodyText.contains("name=\"token\""))
        #expect(form.header("Content-Security-Policy")?.contains("default-src 'none'") == true)
        #expect(Self.login(router, token: "wrong").status == 401)
        #expect(Self.login(router, token: HTTPRouterTests.token).status == 403)

        let ok = Self.login(router, token: HTTPAdminTests.adminToken)
        #expect(ok.status == 303 && ok.header("Location") == "/status")
        let setCookie = try #require(ok.header("Set-Cookie"))
        #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict") && !setCookie.contains("Secure"))
        let cookie = try #require(Self.cookie(ok))
        let page = Self.page(router, cookie: cookie)
        #expect(page.status == 200)
        #expect(page.bodyText.contains(#"<td class="user">alice</td>"#))
        #expect(page.bodyText.contains(#"id="allocations-active">0<"#))
        #expect(page.bodyText.contains(#"<meta http-equiv="refresh" content="5">"#))
        #expect(!page.bodyText.contains("<script") && !page.bodyText.contains("src="))
        #expect(Self.page(router, cookie: "relayd_status=0000").status == 401)
        #expect(Self.page(router, cookie: cookie, monotonic: 2 + 13 * 3600).status == 401)

        let out = router.handle(
            HTTPRequest(method: .post, path: "/status/logout", headers: [("Cookie", cookie)]), on: .api,
            now: HTTPRouterTests.now, monotonic: 3)
        #expect(out.status == 200 && out.header("Set-Cookie")?.contains("Max-Age=0") == true)
        #expect(out.bodyText.contains("Logged out."))
        #expect(Self.page(router, cookie: cookie).status == 401)
    }

    @Test("A bearer token works without the form; a credentials key gets 403; the metrics port has no page")
    func bearer() {
        let (router, server) = HTTPAdminTests.setUp()
        defer { withExtendedLifetime(server) {} }
        #expect(Self.page(router, bearer: HTTPAdminTests.adminToken).status == 200)
        #expect(Self.page(router, bearer: HTTPRouterTests.token).status == 403)
        #expect(Self.page(router, bearer: "nope").status == 401)
        #expect(
            router.handle(HTTPRequest(method: .get, path: "/status"), on: .prometheus, now: 0, monotonic: 0).status == 404)
        #expect(
            router.handle(HTTPRequest(method: .delete, path: "/status"), on: .api, now: 0, monotonic: 0).status == 405)
    }

    @Test("A user name with markup is rendered as text on the page")
    func userNamesAreEscaped() throws {
        let (router, server) = HTTPAdminTests.setUp(records: 1)
        server.records[0].user = "<script>alert(1)</script>"
        let page = Self.page(router, bearer: HTTPAdminTests.adminToken)
        #expect(page.status == 200)
        #expect(page.bodyText.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(!page.bodyText.contains("<script"))
    }

    @Test("A rotated token ends the sessions opened with it, though the key keeps its name")
    func rotatedTokenEndsSessions() throws {
        let (router, server) = HTTPAdminTests.setUp()
        defer { withExtendedLifetime(server) {} }
        let cookie = try #require(Self.cookie(Self.login(router, token: HTTPAdminTests.adminToken)))
        #expect(Self.page(router, cookie: cookie).status == 200)
        router.keyring = APIKeyring(keys: [.init(name: "ops", token: "rotated-token", scope: .admin)])
        let after = Self.page(router, cookie: cookie)
        #expect(after.status == 401 && after.header("WWW-Authenticate") != nil)
        #expect(Self.page(router, bearer: "rotated-token").status == 200)
    }

    @Test("A login or logout form posted from another site is refused (Sec-Fetch-Site: cross-site)")
    func crossSiteForms() {
        let (router, server) = HTTPAdminTests.setUp()
        defer { withExtendedLifetime(server) {} }
        for (path, site, status) in [
            ("/status/login", "cross-site", 403), ("/status/logout", "cross-site", 403),
            ("/status/login", "same-origin", 303),
        ] {
            let response = router.handle(
                HTTPRequest(
                    method: .post, path: path, headers: [("Sec-Fetch-Site", site)],
                    body: Array("token=\(HTTPAdminTests.adminToken)".utf8)),
                on: .api, now: HTTPRouterTests.now, monotonic: 1)
            #expect(response.status == status, "\(path) \(site)")
        }
    }

    @Test("Bearer tokens on the page are rate-limited like every API request")
    func bearerRateLimited() {
        let (router, server) = HTTPAdminTests.setUp()
        defer { withExtendedLifetime(server) {} }
        router.limiter = RateLimiter(rate: 1, burst: 2)
        let statuses = (0..<5).map { _ in Self.page(router, bearer: "guess").status }
        #expect(statuses == [401, 401, 429, 429, 429])
    }

    @Test("Rates come from the sampled totals")
    func escapingAndRates() {
        #expect(StatusPage.escape(#"<b>"x" & 'y'"#) == "&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;")
        var history = TrafficHistory()
        history.record(TrafficCounters(packetsToPeer: 0, bytesToPeer: 0), at: 10)
        history.record(TrafficCounters(packetsToPeer: 500, bytesToPeer: 500_000), at: 15)
        let rates = history.rates()
        #expect(rates.bytesToPeer == 100_000 && rates.packetsToPeer == 100)
        #expect(StatusPage.bitRate(800_000) == "800.0 kbit/s" && StatusPage.bitRate(999) == "999 bit/s")
        #expect(StatusPage.bitRate(2_500_000_000) == "2.5 Gbit/s")
    }

    @Test("The CLI's client reads status and body, and refuses a body shorter than Content-Length")
    func clientParsesResponses() throws {
        let whole = Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}".utf8)
        let response = try APIClient.parse(whole)
        #expect(response.status == 200 && response.body == #"{"a":1}"#)
        let short = Array("HTTP/1.1 200 OK\r\nContent-Length: 70\r\n\r\n{}".utf8)
        #expect(throws: APIClient.Failure.self) { try APIClient.parse(short) }
        #expect(try APIClient.parse(Array("HTTP/1.1 404 Not Found\r\n\r\n".utf8)).status == 404)
        #expect(throws: APIClient.Failure.self) { try APIClient.parse(Array("SSH-2.0\r\n\r\n".utf8)) }
    }
}
