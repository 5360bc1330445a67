/// Token buckets per caller (API key name, or client IP before authentication) in a table of
/// fixed size: memory stays bounded however many callers there are. A caller not in the table
/// starts with a full bucket; when the slots it may use are all taken, the one idle longest
/// is reused (an idle bucket has refilled anyway).
public struct RateLimiter: Sendable {
    struct Bucket: Sendable {
        var key: Int = 0
        var tokens: Double = 0
        var last: Double = -.infinity
        var used = false
    }

    /// Tokens added per second, and the most a bucket holds.
    public let rate: Double
    public let burst: Double
    private var table: [Bucket]
    private let mask: Int
    /// Slots a key may land in, starting at its hash.
    private let probes = 8

    /// `capacity` is rounded up to a power of two.
    public init(rate: Double = 20, burst: Double = 40, capacity: Int = 1024) {
        self.rate = rate
        self.burst = burst
        var size = 16
        while size < capacity { size <<= 1 }
        table = [Bucket](repeating: Bucket(), count: size)
        mask = size - 1
    }

    public var capacity: Int { table.count }

    /// Takes one token from `key`'s bucket at `now` (seconds, monotonic); false when it is empty.
    public mutating func allow<Key: Hashable>(_ key: Key, now: Double) -> Bool {
        var hasher = Hasher()
        hasher.combine(key)
        let hash = hasher.finalize()
        let start = hash & mask
        var victim = start
        for step in 0..<probes {
            let i = (start + step) & mask
            if table[i].used && table[i].key == hash { return take(at: i, now: now) }
            if !table[victim].used { continue }
            if !table[i].used || table[i].last < table[victim].last { victim = i }
        }
        table[victim] = Bucket(key: hash, tokens: burst, last: now, used: true)
        return take(at: victim, now: now)
    }

    private mutating func take(at i: Int, now: Double) -> Bool {
        let elapsed = max(0, now - table[i].last)
        table[i].tokens = min(burst, table[i].tokens + elapsed * rate)
        table[i].last = now
        guard table[i].tokens >= 1 else { return false }
        table[i].tokens -= 1
        return true
    }
}
