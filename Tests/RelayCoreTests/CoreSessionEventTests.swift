import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// A session's life as values (docs/architecture.md, "Session events"): started, refreshed,
/// moved and ended, in the order they happened, with what observers need and nothing they must
/// ask the core for.
@Suite struct CoreSessionEventTests {
    private func describe(_ event: SessionEvent) -> String {
        switch event {
        case .started(let s): "started \(s.session) \(s.fiveTuple.client) \(s.lifetimeSeconds)"
        case .refreshed(let r): "refreshed \(r.session) \(r.fiveTuple.client) \(r.lifetimeSeconds)"
        case .moved(let m): "moved \(m.session) \(m.from.client) \(m.to.client)"
        case .ended(let e): "ended \(e.session) \(e.fiveTuple.client) \(e.reason.rawValue) \(e.durationSeconds)"
        }
    }

    @Test("Allocate, Refresh, a move with the mobility ticket and Refresh 0: one event each, in order")
    func lifeOfASession() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let answer = try client.allocate { w in try w.append(MobilityTicket(bytes: [])) }
        let ticket = try #require(answer.decode(MobilityTicket.self)).bytes
        let session = try #require(harness.allocation(of: CoreFixture.clientA)).session
        harness.advance(by: 10)
        #expect(try client.refresh(lifetime: 900).isSuccess)
        let moved = harness.restClient(at: .literal("198.51.100.20:50123"))
        let moveAnswer = try moved.request(.refresh) { w in
            try w.append(Lifetime(seconds: 600))
            try w.append(MobilityTicket(bytes: ticket))
        }
        #expect(moveAnswer.isSuccess, "\(moveAnswer.description)")
        harness.advance(by: 20)
        #expect(try moved.refresh(lifetime: 0).isSuccess)
        #expect(
            harness.sessionEvents.map(describe) == [
                "started \(session) 192.0.2.1:40001 600",
                "refreshed \(session) 192.0.2.1:40001 900",
                "moved \(session) 192.0.2.1:40001 198.51.100.20:50123",
                // The move's own Refresh extends the allocation too.
                "refreshed \(session) 198.51.100.20:50123 600",
                "ended \(session) 198.51.100.20:50123 refresh_zero 30",
            ])
    }

    @Test("An allocation that expires ends its session with the reason and its duration")
    func expiry() throws {
        let harness = CoreHarness()
        _ = try harness.restClient(at: CoreFixture.clientA).allocate(lifetime: 600)
        harness.advance(by: 601)
        harness.sweep()
        guard case .ended(let summary) = harness.sessionEvents.last else {
            Issue.record("no end: \(harness.sessionEvents.map(describe))")
            return
        }
        #expect(summary.reason == .expired && summary.durationSeconds == 601 && summary.user == "alice")
        #expect(summary.relayedOutside == nil, "the core leaves the kernel's share to the I/O layer")
    }
}
