import StunCodec
import Synchronization

/// A per-source-IP token bucket shared by every loop thread, for the answers an attacker could
/// make relayd send cheaply: 401/438 challenges to unauthenticated requests (`unauth-rate-limit`)
/// and new allocations (`allocate-rate-limit`). The table has a fixed size (`RateLimiter`), so a
/// flood from many sources costs no memory beyond it. Touched only on those paths, never for
/// relayed packets. A rate of 0 turns the limit off.
public final class SourceRateLimiter: Sendable {
    private let buckets: Mutex<RateLimiter>
    /// Requests allowed per second per source IP (0: unlimited).
    public let perSecond: Int

    /// `perSecond` tokens a second per source, bursts of up to twice that.
    public init(perSecond: Int, capacity: Int = 4096) {
        self.perSecond = perSecond
        let rate = Double(max(perSecond, 1))
        buckets = Mutex(RateLimiter(rate: rate, burst: 2 * rate, capacity: perSecond > 0 ? capacity : 16))
    }

    /// Takes a token for `source` at `now` (seconds); false when its bucket is empty.
    public func allow(_ source: IPAddress, now: Int64) -> Bool {
        guard perSecond > 0 else { return true }
        return buckets.withLock { $0.allow(source, now: Double(now)) }
    }
}
