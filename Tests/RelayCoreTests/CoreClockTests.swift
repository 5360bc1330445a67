import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Two clocks (docs/clocks.md): lifetimes, rate limits and bandwidth windows run on the monotonic
/// `now`; only REST expiry and nonces read the wall clock (`RelayCore.wallOffset`). A wall-clock
/// step of an hour, either way, expires nothing early, keeps nothing alive, resets no limiter.
@Suite struct CoreClockTests {
    @Test("Allocations and permissions keep their monotonic lifetimes across a wall-clock step", arguments: [-3600, 3600])
    func lifetimes(step: Int64) throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().lifetime == 600)
        #expect(try client.createPermission([CoreFixture.peer1]).isSuccess)
        harness.core.wallOffset = step

        // 299 s later the permission (300 s) still relays: nothing expired early.
        harness.advance(by: 299)
        harness.sweep()
        let relayed = harness.receive(
            try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: [1]), from: CoreFixture.clientA)
        #expect(relayed.first?.peer?.peer == CoreFixture.peer1)
        // 2 s more and it has expired: nothing lived on either.
        harness.advance(by: 2)
        #expect(
            harness.receive(
                try StunTestMessages.sendIndication(to: CoreFixture.peer1, payload: [2]), from: CoreFixture.clientA
            ).isEmpty)
        #expect(harness.counters.dropped(.noPermission) == 1)
        // The allocation (600 s) is there at 599 s and gone at 601 s.
        harness.advance(to: CoreFixture.start + 599)
        harness.sweep()
        #expect(harness.core.allocationCount == 1)
        harness.advance(to: CoreFixture.start + 601)
        harness.sweep()
        #expect(harness.core.allocationCount == 0)
    }

    @Test("REST expiry and nonces follow the wall clock; the client's next request still authenticates", arguments: [-3600, 3600])
    func wallRules(step: Int64) throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        harness.core.wallOffset = step
        // The nonce was issued an hour away on the wall clock: 438, and the new one works.
        let refreshed = try client.refresh(lifetime: 600)
        #expect(refreshed.isSuccess)
        #expect(harness.counters.auth[AuthOutcome.staleNonce.rawValue] == 1)
        // A REST username that expires within the hour: valid or expired by the wall clock alone.
        let shortLived = harness.restClient(at: CoreFixture.clientB, user: "short", validFor: 1800)
        let answer = try shortLived.allocate()
        #expect(step < 0 ? answer.isSuccess : answer.errorCode == 401)
    }

    @Test("A limiter's bucket does not refill when the wall clock jumps ahead", arguments: [-3600, 3600])
    func limiterDoesNotReset(step: Int64) throws {
        let harness = CoreHarness(options: CoreFixture.options { $0.authFailureRateLimit = 1 })
        let username = CoreFixture.restUsername("mallory")
        let attacker = harness.client(at: CoreFixture.clientA, username: username, password: "guess")
        try attacker.challenge()
        func answered() throws -> Bool {
            try attacker.send(try attacker.signedRequest(.allocate) { try $0.append(RequestedTransport.udp) }) != nil
        }
        #expect(try answered() && answered())
        #expect(try !answered())
        harness.core.wallOffset = step
        #expect(try !answered())
        #expect(harness.counters.dropped(.authFailureLimited) == 2)
    }
}
