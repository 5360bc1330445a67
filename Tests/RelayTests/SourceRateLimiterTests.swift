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
}
