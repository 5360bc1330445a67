import StunCodec
import Synchronization

/// A per-source-IP token bucket shared by every loop thread. The table has a fixed size
/// (`RateLimiter`), so a flood from many sources costs no memory beyond it, and it is split into
/// shards by source address, each behind its own lock: a source always meets the same shard (its
/// bucket is the one it would have in one table), and loops serving different sources rarely
/// wait for each other, however hard one source floods. Touched only on the paths it limits,
/// never for relayed packets. A rate of 0 turns the limit off.
public final class SourceRateLimiter: Sendable {
    private final class Shard: Sendable {
        let buckets: Locked<RateLimiter<IPAddress>>
        init(_ limiter: RateLimiter<IPAddress>) { buckets = Locked(limiter) }
    }

    private let shards: [Shard]
    /// Tokens added per second per source IP (0: unlimited).
    public let perSecond: Int
    /// The most a source's bucket holds.
    public let burst: Int

    /// `perSecond` tokens a second per source, up to `burst` (default twice the rate) at once;
    /// `capacity` buckets in all, over `shardCount` shards.
    public init(perSecond: Int, burst: Int? = nil, capacity: Int = 4096, shardCount: Int = 16) {
        self.perSecond = perSecond
        let rate = max(perSecond, 1)
        let burst = max(burst ?? 2 * rate, 1)
        self.burst = burst
        let count = perSecond > 0 ? max(1, shardCount) : 1
        let perShard = perSecond > 0 ? max(16, capacity / count) : 16
        shards = (0..<count).map { _ in
            Shard(RateLimiter(rate: Double(rate), burst: Double(burst), capacity: perShard))
        }
    }

    /// Takes a token for `source` at `now` (seconds); false when its bucket is empty.
    public func allow(_ source: IPAddress, now: Int64) -> Bool {
        guard perSecond > 0 else { return true }
        return shard(of: source).buckets.withLock { $0.allow(source, now: Double(now)) }
    }

    /// Gives `source` a token back (at most up to `burst`).
    public func refund(_ source: IPAddress, now: Int64) {
        guard perSecond > 0 else { return }
        shard(of: source).buckets.withLock { $0.refund(source, now: Double(now)) }
    }

    /// The sources whose buckets are not full at `now`, with the tokens each holds: what a
    /// live upgrade hands the heir (docs/live-upgrade.md).
    public func held(now: Int64) -> [(source: IPAddress, tokens: Double)] {
        guard perSecond > 0 else { return [] }
        return shards.flatMap { shard in
            shard.buckets.withLock { $0.held(now: Double(now)).map { (source: $0.key, tokens: $0.tokens) } }
        }
    }

    /// Gives `source` a bucket holding `tokens` at `now`, as the process before this one held it.
    public func restore(_ source: IPAddress, tokens: Double, now: Int64) {
        guard perSecond > 0 else { return }
        shard(of: source).buckets.withLock { $0.restore(source, tokens: tokens, now: Double(now)) }
    }

    private func shard(of source: IPAddress) -> Shard {
        var hasher = Hasher()
        hasher.combine(source)
        // The top bits pick the shard; `RateLimiter` places the bucket by the low bits.
        return shards[Int(UInt(bitPattern: hasher.finalize()) >> 32) % shards.count]
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

    public init(challenges: SourceRateLimiter, failures: SourceRateLimiter, allocations: SourceRateLimiter) {
        self.challenges = challenges
        self.failures = failures
        self.allocations = allocations
    }
}
