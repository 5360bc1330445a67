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
        let hash = Self.hash(key)
        let i = slot(of: hash) ?? claimSlot(for: hash, now: now)
        refill(at: i, now: now)
        guard table[i].tokens >= 1 else { return false }
        table[i].tokens -= 1
        return true
    }

    /// Gives `key` one token back (never above `burst`): what it spent was not abuse after all
    /// (a challenge answered with valid credentials). A key not in the table has a full bucket.
    public mutating func refund<Key: Hashable>(_ key: Key, now: Double) {
        guard let i = slot(of: Self.hash(key)) else { return }
        refill(at: i, now: now)
        table[i].tokens = min(burst, table[i].tokens + 1)
    }

    private static func hash<Key: Hashable>(_ key: Key) -> Int {
        var hasher = Hasher()
        hasher.combine(key)
        return hasher.finalize()
    }

    /// The slot holding `hash`'s bucket, if it has one.
    private func slot(of hash: Int) -> Int? {
        let start = hash & mask
        for step in 0..<probes {
            let i = (start + step) & mask
            if table[i].used && table[i].key == hash { return i }
        }
        return nil
    }

    /// A free slot for `hash`, or the one idle longest among those it may use, with a full bucket.
    private mutating func claimSlot(for hash: Int, now: Double) -> Int {
        let start = hash & mask
        var victim = start
        for step in 0..<probes {
            let i = (start + step) & mask
            if !table[victim].used { break }
            if !table[i].used || table[i].last < table[victim].last { victim = i }
        }
        table[victim] = Bucket(key: hash, tokens: burst, last: now, used: true)
        return victim
    }

    private mutating func refill(at i: Int, now: Double) {
        let elapsed = max(0, now - table[i].last)
        table[i].tokens = min(burst, table[i].tokens + elapsed * rate)
        table[i].last = now
    }
}
