import StunCodec
import Synchronization

/// A per-source-IP token bucket shared by every loop thread. The table has a fixed size
/// (`RateLimiter`), so a flood from many sources costs no memory beyond it. Touched only on the
/// paths it limits, never for relayed packets. A rate of 0 turns the limit off.
public final class SourceRateLimiter: Sendable {
    private let buckets: Mutex<RateLimiter>
    /// Tokens added per second per source IP (0: unlimited).
    public let perSecond: Int
    /// The most a source's bucket holds.
    public let burst: Int

    /// `perSecond` tokens a second per source, up to `burst` (default twice the rate) at once.
    public init(perSecond: Int, burst: Int? = nil, capacity: Int = 4096) {
        self.perSecond = perSecond
        let rate = max(perSecond, 1)
        self.burst = max(burst ?? 2 * rate, 1)
        buckets = Mutex(
            RateLimiter(rate: Double(rate), burst: Double(self.burst), capacity: perSecond > 0 ? capacity : 16))
    }

    /// Takes a token for `source` at `now` (seconds); false when its bucket is empty.
    public func allow(_ source: IPAddress, now: Int64) -> Bool {
        guard perSecond > 0 else { return true }
        return buckets.withLock { $0.allow(source, now: Double(now)) }
    }

    /// Gives `source` a token back (at most up to `burst`).
    public func refund(_ source: IPAddress, now: Int64) {
        guard perSecond > 0 else { return }
        buckets.withLock { $0.refund(source, now: Double(now)) }
    }
}

/// The per-source-IP limits, built to cost attackers and not the users behind one shared NAT
/// (docs/rate-limits.md). Nothing here refuses a request with valid credentials, except
/// `allocate-rate-limit` when the operator sets it.
public struct SourceLimits: Sendable {
    /// 401/438 challenges not yet answered with valid credentials (`unauth-rate-limit`,
    /// `unauth-rate-burst`): each challenge takes a token, each authenticated request from the
    /// same source gives one back, so a NAT's users pay nothing while a source that only
    /// collects challenges (or a forged source) is held to the rate.
    public var challenges: SourceRateLimiter
    /// Failed authentications: bad MESSAGE-INTEGRITY, unknown or expired user
    /// (`auth-failure-rate-limit`). Past it the 401 is not sent; valid requests still are answered.
    public var failures: SourceRateLimiter
    /// New allocations (`allocate-rate-limit`); off unless the operator sets it.
    public var allocations: SourceRateLimiter

    public init(configuration c: RelayConfiguration) {
        challenges = SourceRateLimiter(perSecond: c.unauthRateLimit, burst: c.unauthRateBurst)
        failures = SourceRateLimiter(perSecond: c.authFailureRateLimit)
        allocations = SourceRateLimiter(perSecond: c.allocateRateLimit)
    }

    /// After a reload: a limiter whose settings changed starts afresh, the others keep their buckets.
    public func updated(from previous: RelayConfiguration, to next: RelayConfiguration) -> SourceLimits {
        let fresh = SourceLimits(configuration: next)
        var kept = self
        if next.unauthRateLimit != previous.unauthRateLimit || next.unauthRateBurst != previous.unauthRateBurst {
            kept.challenges = fresh.challenges
        }
        if next.authFailureRateLimit != previous.authFailureRateLimit { kept.failures = fresh.failures }
        if next.allocateRateLimit != previous.allocateRateLimit { kept.allocations = fresh.allocations }
        return kept
    }
}
