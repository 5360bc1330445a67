import Logging
import RelayCore
import Relay
import Testing

/// Credential requests are limited per API key (or per client IP before authentication) by
/// token buckets in a table of fixed size.
@Suite struct HTTPRateLimiterTests {
    /// Which of `times` requests from `key` pass.
    static func attempts(_ limiter: inout RateLimiter<String>, _ key: String, at times: [Double]) -> [Bool] {
        times.map { limiter.allow(key, now: $0) }
    }

    @Test("A burst of 40 passes at once, the 41st is refused, then 20 more per second")
    func burstThenRate() {
        var limiter = RateLimiter<String>(rate: 20, burst: 40)
        let burst = Self.attempts(&limiter, "key:web", at: Array(repeating: 100, count: 41))
        #expect(burst == Array(repeating: true, count: 40) + [false])
        #expect(Self.attempts(&limiter, "key:web", at: [100.04, 100.06, 100.06]) == [false, true, false])
        let nextSecond = Self.attempts(&limiter, "key:web", at: (1...20).map { 100.06 + Double($0) * 0.05 })
        #expect(nextSecond == Array(repeating: true, count: 20))
        #expect(Self.attempts(&limiter, "key:web", at: [1000]) == [true])
    }

    @Test("Each key has its own bucket")
    func independentKeys() {
        var limiter = RateLimiter<String>(rate: 1, burst: 2)
        #expect(Self.attempts(&limiter, "ip:192.0.2.1", at: [0, 0, 0]) == [true, true, false])
        #expect(Self.attempts(&limiter, "ip:192.0.2.2", at: [0]) == [true])
        #expect(Self.attempts(&limiter, "key:web", at: [0]) == [true])
    }

    @Test("The table never grows: many callers reuse the slots idle longest")
    func fixedSize() {
        var limiter = RateLimiter<String>(rate: 1, burst: 1, capacity: 64)
        #expect(limiter.capacity == 64)
        for i in 0..<10_000 { _ = limiter.allow("ip:\(i)", now: Double(i)) }
        #expect(limiter.capacity == 64)
        // A caller that was just limited is still limited: recent buckets are not the ones reused.
        #expect(Self.attempts(&limiter, "ip:9999", at: [9999]) == [false])
    }
}

@Suite struct APIRateLimitKeyTests {
    @Test("api-rate-limit=0 turns the limit off: 500 requests in one instant all get credentials")
    func unlimited() {
        var c = RelayConfiguration()
        c.useAuthSecret = true
        c.staticAuthSecrets = ["north"]
        c.apiKeys = [.init(name: "web", token: HTTPRouterTests.token)]
        let router = APIRouter(
            credentials: CredentialService(configuration: c), keyring: APIKeyring(keys: c.apiKeys),
            registry: MetricsRegistry(threads: 1), health: HTTPRouterTests.ready(),
            logger: Logger(label: "relayd.http-tests") { _ in SwiftLogNoOpLogHandler() },
            limiter: RateLimiter(rate: 0, burst: 0))
        let statuses = (0..<500).map { _ in
            router.handle(
                HTTPRouterTests.get(APIRouter.credentialsPath, query: "user=alice"), on: .api,
                now: HTTPRouterTests.now, monotonic: 5
            ).status
        }
        #expect(statuses.allSatisfy { $0 == 200 })
        // The default (20/s, bursts of 40) refuses the 41st.
        let limited = HTTPRouterTests.router()
        let answered = (0..<41).map { _ in
            limited.handle(
                HTTPRouterTests.get(APIRouter.credentialsPath, query: "user=alice"), on: .api,
                now: HTTPRouterTests.now, monotonic: 5
            ).status
        }
        #expect(answered.last == 429 && answered.dropLast().allSatisfy { $0 == 200 })
    }
}
