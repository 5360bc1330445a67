import Relay
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The admin API through the router (docs/admin.md), against a stand-in for the running server
/// that holds allocation records as its loop threads would hand them over.
@Suite struct HTTPAdminTests {
    static let adminToken = "adm1n-t0ken"

    final class Server: AdminControl {
        var records: [AllocationRecord]
        var terminated: [AllocationSelector] = []
        var answers = true
        let blocklist = UserBlocklist()
        /// Blocks set and lifted through the API, in order (the real server keeps them too).
        var blockChanges: [String] = []

        init(records: [AllocationRecord]) { self.records = records }

        func setBlock(_ entry: UserBlocklist.Entry) -> Bool {
            blockChanges.append("set \(entry.user) by \(entry.setBy) at \(entry.setAt)")
            return blocklist.block(entry)
        }

        func liftBlock(_ user: String, by: String) -> Bool {
            blockChanges.append("lift \(user) by \(by)")
            return blocklist.unblock(user)
        }

        var upgrades: [String] = []
        func upgrade(trigger: String) -> UpgradeOutcome {
            upgrades.append(trigger)
            return answers ? .succeeded(pid: 4242, allocations: 3) : .failed("the heir gave up: test")
        }

        func allocations(_ selector: AllocationSelector, tenant: String?, after: String?, limit: Int)
            -> AllocationPageResult?
        {
            guard let matching = allocations(selector, tenant: tenant) else { return nil }
            let remaining = matching.filter { after == nil || $0.session > after! }.sorted { $0.session < $1.session }
            return AllocationPageResult(
                records: Array(remaining.prefix(limit)), total: matching.count, more: remaining.count > limit)
        }

        func allocations(_ selector: AllocationSelector, tenant: String? = nil) -> [AllocationRecord]? {
            guard answers else { return nil }
            return records.filter {
                if let tenant, $0.tenant != tenant { return false }
                switch selector {
                case .all: return true
                case .session(let s): return $0.session == s
                case .user(let u): return $0.user == u
                }
            }
        }

        func userTraffic() -> [UserTraffic]? {
            guard answers else { return nil }
            return Array(UserTraffic.byUser(records.map { UserTraffic(user: $0.user, allocations: 1, traffic: $0.traffic) }).values)
        }

        func terminate(_ selector: AllocationSelector, tenant: String?) -> Int? {
            guard let chosen = allocations(selector, tenant: tenant) else { return nil }
            terminated.append(selector)
            records.removeAll { r in chosen.contains { $0.session == r.session } }
            return chosen.count
        }
    }

    static func record(_ n: Int, user: String) -> AllocationRecord {
        let hex = String(n, radix: 16)
        return AllocationRecord(
            session: String(repeating: "0", count: 16 - hex.count) + hex, user: user,
            fiveTuple: FiveTuple(
                client: .literal("192.0.2.1:\(40000 + n)"), server: .literal("198.51.100.7:3478"), transport: .udp),
            relayed: [.literal("198.51.100.7:\(50000 + n)")], ageSeconds: 5, remainingSeconds: 595,
            permissions: [(IPAddress("203.0.113.9")!, 295)], channels: [(0x4000, .literal("203.0.113.9:7000"), 595)],
            traffic: TrafficCounters(packetsToPeer: 3, bytesToPeer: 300, packetsToClient: 2, bytesToClient: 200),
            mobile: false, thread: n % 2)
    }

    /// The router holds the server weakly (the daemon owns both): tests keep `Server` alive.
    static func setUp(records: Int = 7) -> (APIRouter, Server) {
        let router = HTTPRouterTests.router {
            $0.apiKeys.append(.init(name: "ops", token: adminToken, scope: .admin))
        }
        let server = Server(records: (1...records).map { record($0, user: $0 <= 4 ? "alice" : "bob") })
        router.admin = server
        return (router, server)
    }

    static func call(
        _ router: APIRouter, _ method: HTTPRequest.Method, _ path: String, query: String? = nil,
        token: String? = adminToken, body: String = ""
    ) -> HTTPResponse {
        router.handle(
            HTTPRouterTests.get(
                path, query: query, headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [], method: method,
                body: body),
            on: .api, now: HTTPRouterTests.now, monotonic: 1)
    }

    @Test("A list is JSON in session order with every field; pages follow the cursor; a user filter applies")
    func list() throws {
        let (router, server) = Self.setUp()
        defer { withExtendedLifetime(server) {} }
        let all = Self.call(router, .get, "/api/v1/allocations")
        #expect(all.status == 200)
        let page = try AllocationPage.decode(all.bodyText)
        #expect(page.total == 7 && page.count == 7 && page.next_cursor == nil)
        let first = try #require(page.allocations.first)
        #expect(first.session == "0000000000000001" && first.user == "alice" && first.transport == "udp")
        #expect(first.client == "192.0.2.1:40001" && first.relayed == ["198.51.100.7:50001"])
        #expect(first.permissions.first?.peer == "203.0.113.9" && first.channels.first?.number == 0x4000)
        #expect(first.traffic.bytes_to_peer == 300 && first.traffic.packets_to_client == 2)

        let one = try AllocationPage.decode(Self.call(router, .get, "/api/v1/allocations", query: "limit=3").bodyText)
        #expect(one.allocations.map(\.session).last == "0000000000000003" && one.next_cursor == "0000000000000003")
        let two = try AllocationPage.decode(
            Self.call(router, .get, "/api/v1/allocations", query: "limit=3&cursor=0000000000000006").bodyText)
        #expect(two.allocations.map(\.session) == ["0000000000000007"] && two.next_cursor == nil)

        let bobs = try AllocationPage.decode(Self.call(router, .get, "/api/v1/allocations", query: "user=bob").bodyText)
        #expect(bobs.total == 3 && Set(bobs.allocations.map(\.user)) == ["bob"])
        #expect(Self.call(router, .get, "/api/v1/allocations", query: "limit=1001").status == 400)
        #expect(Self.call(router, .get, "/api/v1/allocations", query: "colour=red").status == 400)
        #expect(Self.call(router, .get, "/api/v1/allocations/0000000000000002").status == 200)
        #expect(Self.call(router, .get, "/api/v1/allocations/00000000000000ff").status == 404)
        #expect(Self.call(router, .get, "/api/v1/allocations/not-a-session").status == 404)
    }

    @Test("401 without a valid key, 403 for a credentials-only key, on every admin path")
    func scopes() {
        let (router, server) = Self.setUp()
        for (method, path) in [
            (HTTPRequest.Method.get, "/api/v1/allocations"), (.delete, "/api/v1/allocations"),
            (.delete, "/api/v1/allocations/0000000000000001"), (.post, "/api/v1/users/alice/block"),
            (.get, "/api/v1/blocks"),
        ] {
            #expect(Self.call(router, method, path, token: nil).status == 401)
            #expect(Self.call(router, method, path, token: "wrong").status == 401)
            #expect(Self.call(router, method, path, token: HTTPRouterTests.token).status == 403)
        }
        #expect(server.terminated.isEmpty && server.blocklist.list(now: 0).isEmpty)
        #expect(router.service.adminRequests[401] == 10 && router.service.adminRequests[403] == 5)
        #expect(router.metricsText().contains("relayd_admin_requests_total{code=\"403\"} 5"))
    }

    @Test("DELETE ends one session or a user's; without ?user it is refused; 503 when a loop does not answer")
    func terminate() {
        let (router, server) = Self.setUp()
        #expect(Self.call(router, .delete, "/api/v1/allocations").status == 400)
        #expect(Self.call(router, .delete, "/api/v1/allocations", query: "user=alice&user=bob").status == 400)
        let one = Self.call(router, .delete, "/api/v1/allocations/0000000000000005")
        #expect(one.status == 200 && one.bodyText == #"{"terminated":1}"#)
        #expect(Self.call(router, .delete, "/api/v1/allocations/0000000000000005").status == 404)
        let alices = Self.call(router, .delete, "/api/v1/allocations", query: "user=alice")
        #expect(alices.status == 200 && alices.bodyText == #"{"terminated":4}"#)
        #expect(server.records.map(\.user) == ["bob", "bob"])
        server.answers = false
        #expect(Self.call(router, .get, "/api/v1/allocations").status == 503)
        #expect(Self.call(router, .delete, "/api/v1/allocations", query: "user=bob").status == 503)
        router.admin = nil
        #expect(Self.call(router, .get, "/api/v1/allocations").status == 503)
    }

    @Test("POST /api/v1/upgrade answers the heir's pid, 409 with the reason when it failed, 405 to GET")
    func upgrade() {
        let (router, server) = Self.setUp()
        defer { withExtendedLifetime(server) {} }
        let done = Self.call(router, .post, APIRouter.upgradePath)
        #expect(done.status == 200)
        #expect(done.bodyText == #"{"result":"succeeded","pid":4242,"allocations":3}"#)
        #expect(server.upgrades == ["api:ops"])
        server.answers = false
        let failed = Self.call(router, .post, APIRouter.upgradePath)
        #expect(failed.status == 409)
        #expect(failed.bodyText.contains("upgrade_failed") && failed.bodyText.contains("the heir gave up"))
        #expect(Self.call(router, .get, APIRouter.upgradePath).status == 405)
        #expect(Self.call(router, .post, APIRouter.upgradePath, token: nil).status == 401)
        #expect(server.upgrades.count == 2)
    }

    @Test("A block takes seconds from JSON or the query, is listed, lifted, and bounded")
    func block() {
        let (router, server) = Self.setUp()
        let now = HTTPRouterTests.now
        let json = Self.call(router, .post, "/api/v1/users/al%20ice/block", body: #"{"seconds": 60}"#)
        #expect(json.status == 200)
        #expect(
            json.bodyText == #"{"user":"al ice","blocked":true,"until":\#(now + 60),"set_by":"ops","set_at":\#(now)}"#)
        #expect(server.blocklist.isBlocked("al ice", now: now))
        #expect(Self.call(router, .post, "/api/v1/users/bob/block", query: "seconds=30").status == 200)
        #expect(
            Self.call(router, .get, "/api/v1/blocks").bodyText
                == #"{"blocks":[{"user":"al ice","until":\#(now + 60),"set_by":"ops","set_at":\#(now)},"#
                + #"{"user":"bob","until":\#(now + 30),"set_by":"ops","set_at":\#(now)}]}"#)
        #expect(Self.call(router, .get, "/api/v1/users/bob/block").status == 200)
        #expect(Self.call(router, .delete, "/api/v1/users/bob/block").status == 200)
        #expect(Self.call(router, .get, "/api/v1/users/bob/block").status == 404)
        #expect(Self.call(router, .delete, "/api/v1/users/bob/block").status == 404)
        #expect(server.blockChanges == ["set al ice by ops at \(now)", "set bob by ops at \(now)", "lift bob by ops", "lift bob by ops"])
        for bad in [#"{"seconds": 0}"#, #"{"seconds": "x"}"#, "", #"{"seconds": 99999999}"#] {
            #expect(Self.call(router, .post, "/api/v1/users/carol/block", body: bad).status == 400)
        }
        #expect(Self.call(router, .post, "/api/v1/users/%00/block", query: "seconds=5").status == 400)
        #expect(Self.call(router, .put, "/api/v1/users/carol/block").status == 405)
    }

    @Test("The CLI's helpers: durations, byte counts, and API URLs")
    func cliHelpers() {
        #expect(AllocationPage.parseDuration("90") == 90 && AllocationPage.parseDuration("15m") == 900)
        #expect(AllocationPage.parseDuration("2h") == 7200 && AllocationPage.parseDuration("7d") == 604_800)
        #expect(AllocationPage.parseDuration("0s") == nil && AllocationPage.parseDuration("m") == nil)
        #expect(AllocationPage.parseDuration("1w") == nil && AllocationPage.parseDuration("15M") == nil)
        #expect(AllocationPage.parseDuration("9223372036854775807d") == nil)
        #expect(AllocationPage.duration(59) == "59s" && AllocationPage.duration(245) == "4m05s")
        #expect(AllocationPage.duration(7380) == "2h03m")
        #expect(AllocationPage.bytes(512) == "512B" && AllocationPage.bytes(1500) == "1.5kB")
        #expect(AllocationPage.bytes(3_200_000) == "3.2MB")
        let v6 = APIClient.Endpoint(url: "https://[::1]:8443/")
        #expect(v6?.host == "::1" && v6?.port == 8443 && v6?.tls == true)
        #expect(APIClient.Endpoint(url: "http://turn.example.com")?.port == 80)
        #expect(APIClient.Endpoint(url: "ftp://x") == nil && APIClient.Endpoint(url: "http://h:port") == nil)
    }
}
