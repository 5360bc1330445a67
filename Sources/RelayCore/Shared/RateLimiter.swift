/// Token buckets per caller (API key name, or client IP before authentication) in a table of
/// fixed size: memory stays bounded however many callers there are. A caller not in the table
/// starts with a full bucket; when the slots it may use are all taken, the one idle longest
/// is reused (an idle bucket has refilled anyway). Each bucket keeps its caller, so the buckets
/// that are not full can be handed to another process (a live upgrade, docs/live-upgrade.md),
/// whose hashes differ.
public struct RateLimiter<Key: Hashable & Sendable>: Sendable {
    struct Bucket: Sendable {
        var hash: Int = 0
        var key: Key?
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
    public mutating func allow(_ key: Key, now: Double) -> Bool {
        let hash = Self.hash(key)
        let i = slot(of: hash) ?? claimSlot(for: key, hash: hash, now: now)
        refill(at: i, now: now)
        guard table[i].tokens >= 1 else { return false }
        table[i].tokens -= 1
        return true
    }

    /// Gives `key` one token back (never above `burst`): what it spent was not abuse after all
    /// (a challenge answered with valid credentials). A key not in the table has a full bucket.
    public mutating func refund(_ key: Key, now: Double) {
        guard let i = slot(of: Self.hash(key)) else { return }
        refill(at: i, now: now)
        table[i].tokens = min(burst, table[i].tokens + 1)
    }

    /// The callers whose buckets are not full at `now`, with the tokens each holds.
    public mutating func held(now: Double) -> [(key: Key, tokens: Double)] {
        var held: [(key: Key, tokens: Double)] = []
        for i in table.indices where table[i].used {
            refill(at: i, now: now)
            if table[i].tokens < burst, let key = table[i].key { held.append((key, table[i].tokens)) }
        }
        return held
    }

    /// Gives `key` a bucket holding `tokens` (at most `burst`, at least none) at `now`, as
    /// another process held it.
    public mutating func restore(_ key: Key, tokens: Double, now: Double) {
        let hash = Self.hash(key)
        let i = slot(of: hash) ?? claimSlot(for: key, hash: hash, now: now)
        table[i].tokens = min(burst, max(0, tokens))
        table[i].last = now
    }

    private static func hash(_ key: Key) -> Int {
        var hasher = Hasher()
        hasher.combine(key)
        return hasher.finalize()
    }

    /// The slot holding `hash`'s bucket, if it has one.
    private func slot(of hash: Int) -> Int? {
        let start = hash & mask
        for step in 0..<probes {
            let i = (start + step) & mask
            if table[i].used && table[i].hash == hash { return i }
        }
        return nil
    }

    /// A free slot for `hash`, or the one idle longest among those it may use, with a full bucket.
    private mutating func claimSlot(for key: Key, hash: Int, now: Double) -> Int {
        let start = hash & mask
        var victim = start
        for step in 0..<probes {
            let i = (start + step) & mask
            if !table[victim].used { break }
            if !table[i].used || table[i].last < table[victim].last { victim = i }
        }
        table[victim] = Bucket(hash: hash, key: key, tokens: burst, last: now, used: true)
        return victim
    }

    private mutating func refill(at i: Int, now: Double) {
        let elapsed = max(0, now - table[i].last)
        table[i].tokens = min(burst, table[i].tokens + elapsed * rate)
        table[i].last = now
    }
}
