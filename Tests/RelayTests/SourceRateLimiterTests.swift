import Dispatch
import Relay
import RelayCore
import StunCodec
import Synchronization
import Testing

/// The sharded per-source limiter keeps one bucket per source, whichever shard and thread.
@Suite struct SourceRateLimiterTests {
    @Test("Four threads over 256 sources at one instant: each source gets exactly its burst")
    func exactPerSourceUnderThreads() {
        let limiter = SourceRateLimiter(perSecond: 5, burst: 10)
        let sources = (0..<256).map { IPAddress("198.51.\($0 / 250).\($0 % 250 + 1)")! }
        let granted = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for round in 0..<20 {
                for (i, source) in sources.enumerated() where (i + round + thread) % 2 == 0 || round >= 10 {
                    if limiter.allow(source, now: 100) { granted.add(1, ordering: .relaxed) }
                }
            }
        }
        #expect(granted.load(ordering: .relaxed) == 256 * 10)
    }

    @Test("A refund returns one token to that source only, never above the burst")
    func refundIsPerSource() {
        let limiter = SourceRateLimiter(perSecond: 1, burst: 2)
        let a = IPAddress("192.0.2.1")!, b = IPAddress("192.0.2.2")!
        #expect(limiter.allow(a, now: 0) && limiter.allow(a, now: 0) && !limiter.allow(a, now: 0))
        #expect(limiter.allow(b, now: 0) && limiter.allow(b, now: 0) && !limiter.allow(b, now: 0))
        limiter.refund(a, now: 0)
        #expect(limiter.allow(a, now: 0))
        #expect(!limiter.allow(b, now: 0))
        for _ in 0..<5 { limiter.refund(a, now: 0) }
        #expect(limiter.allow(a, now: 0) && limiter.allow(a, now: 0) && !limiter.allow(a, now: 0))
    }

    @Test("The buckets that are not full go to another limiter with their tokens; full ones do not")
    func heldBucketsGoOver() {
        let old = SourceRateLimiter(perSecond: 1, burst: 4)
        let spent = IPAddress("192.0.2.1")!, half = IPAddress("2001:db8::7")!, idle = IPAddress("192.0.2.3")!
        for _ in 0..<4 { _ = old.allow(spent, now: 10) }
        for _ in 0..<2 { _ = old.allow(half, now: 10) }
        _ = old.allow(idle, now: 0)
        // At 10 the idle source has refilled: not held.
        let held = Dictionary(uniqueKeysWithValues: old.held(now: 10).map { ($0.source, $0.tokens) })
        #expect(held == [spent: 0, half: 2])

        let heir = SourceRateLimiter(perSecond: 1, burst: 4)
        for (source, tokens) in held { heir.restore(source, tokens: tokens, now: 10) }
        #expect(!heir.allow(spent, now: 10))
        #expect(heir.allow(half, now: 10) && heir.allow(half, now: 10) && !heir.allow(half, now: 10))
        #expect(heir.allow(spent, now: 11), "it refills at the rate")
        // More tokens than the heir's burst are cut to it; an unlimited heir keeps nothing.
        heir.restore(idle, tokens: 99, now: 11)
        #expect((0..<5).filter { _ in heir.allow(idle, now: 11) }.count == 4)
        let unlimited = SourceRateLimiter(perSecond: 0)
        unlimited.restore(spent, tokens: 0, now: 0)
        #expect(unlimited.held(now: 0).isEmpty && unlimited.allow(spent, now: 0))
    }
}
