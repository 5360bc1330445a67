import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Per-source-IP limits that cost attackers and not the users behind one shared NAT
/// (docs/rate-limits.md): valid credentials are never refused for their source address (unless
/// `allocate-rate-limit` is set), challenges cost only while they go unanswered, and failed
/// authentications are limited per source.
@Suite struct CoreSourceLimitTests {
    /// One NAT address with many client ports behind it.
    static let nat = IPAddress.literal("198.51.100.9")
    static let otherSource = TransportAddress.literal("203.0.113.50:40000")

    private func harness(_ adjust: (inout CoreFixture.Options) -> Void = { _ in }) -> CoreHarness {
        CoreHarness(
            options: CoreFixture.options {
                $0.settings.minPort = 20000
                $0.settings.maxPort = 29999
                adjust(&$0)
            })
    }

    private func behindNAT(_ port: Int) -> TransportAddress { TransportAddress(ip: Self.nat, port: UInt16(port)) }

    @Test("With the defaults, 4,000 clients behind one address allocate in the same second")
    func sharedNATAllocates() throws {
        let harness = harness()
        for i in 0..<4000 {
            let client = harness.restClient(at: behindNAT(30000 + i), user: "u\(i)")
            #expect(try client.allocate().isSuccess)
        }
        #expect(harness.core.allocationCount == 4000)
        #expect(harness.counters.dropped(.rateLimited) == 0)
    }

    @Test("Challenges answered with valid credentials cost nothing; unanswered ones reach the burst")
    func answeredChallengesAreRefunded() throws {
        let harness = harness {
            $0.unauthRateLimit = 1
            $0.unauthRateBurst = 5
        }
        // 50 challenge-then-allocate rounds in one second: each answer gives the token back.
        for i in 0..<50 {
            #expect(try harness.restClient(at: behindNAT(30000 + i), user: "u\(i)").allocate().isSuccess)
        }
        // Five challenges left unanswered empty the bucket; the sixth gets no answer.
        let collectors = (0..<6).map { harness.restClient(at: behindNAT(31000 + $0)) }
        for c in collectors.prefix(5) { #expect(try c.challenge().errorCode == 401) }
        #expect(throws: TurnTestClient.NoAnswer.self) { try collectors[5].challenge() }
        #expect(harness.counters.dropped(.rateLimited) == 1)
        // A client that already holds a nonce is still served: valid credentials are never limited,
        // and its success gives the source one challenge back.
        let holder = harness.restClient(at: behindNAT(31000))
        holder.realm = collectors[0].realm
        holder.nonce = collectors[0].nonce
        #expect(try holder.allocate().isSuccess)
        #expect(try collectors[5].challenge().errorCode == 401)
    }

    @Test("A wrong-password flood is answered up to twice auth-failure-rate-limit, then dropped; valid requests from the same address and other sources are served")
    func failedAuthenticationsAreLimited() throws {
        let harness = harness()
        let username = CoreFixture.restUsername("mallory")
        let attacker = harness.client(at: behindNAT(40000), username: username, password: "guess")
        try attacker.challenge()
        var answered = 0
        for _ in 0..<100 {
            if let answer = try attacker.send(try attacker.signedRequest(.allocate) { try $0.append(RequestedTransport.udp) }) {
                #expect(answer.errorCode == 401)
                answered += 1
            }
        }
        #expect(answered == 10)
        #expect(harness.counters.dropped(.authFailureLimited) == 90)
        #expect(harness.counters.auth[AuthOutcome.badIntegrity.rawValue] == 100)
        // Behind the same address, a user with valid credentials is not refused.
        #expect(try harness.restClient(at: behindNAT(40001), user: "colleague").allocate().isSuccess)
        // Another source's wrong password still gets its 401, and its valid one an allocation.
        let other = harness.client(at: Self.otherSource, username: username, password: "typo")
        #expect(try other.allocate().errorCode == 401)
        #expect(try harness.restClient(at: Self.otherSource, user: "bob").allocate().isSuccess)
        // A second later the source has earned 5 more answers.
        harness.advance(by: 1)
        var later = 0
        for _ in 0..<10 {
            if try attacker.send(try attacker.signedRequest(.allocate) { try $0.append(RequestedTransport.udp) }) != nil {
                later += 1
            }
        }
        #expect(later == 5)
    }

    @Test("allocate-rate-limit is off by default and applies when the operator sets it")
    func allocateRateLimitOnlyWhenSet() throws {
        let open = harness()
        for i in 0..<100 {
            #expect(try open.restClient(at: behindNAT(30000 + i), user: "u\(i)").allocate().isSuccess)
        }
        let limited = harness { $0.allocateRateLimit = 2 }
        for i in 0..<4 {
            #expect(try limited.restClient(at: behindNAT(30000 + i), user: "u\(i)").allocate().isSuccess)
        }
        #expect(try limited.restClient(at: behindNAT(30004), user: "u4").allocate().errorCode == 486)
    }
}
