/// Hands out relay ports from this thread's share of `min-port`...`max-port` (RFC 8656 §7.2:
/// the server picks the relayed transport address). Each loop thread owns a disjoint slice, so
/// no locks are needed; EVEN-PORT pairs (RFC 8656 §18.7) never straddle slices.
public struct PortAllocator: Sendable {
    public let range: ClosedRange<UInt16>
    private var inUse: [Bool]
    private var cursor: Int
    public private(set) var usedCount = 0

    /// The slice of `min...max` that thread `index` of `count` owns.
    public static func slice(min: UInt16, max: UInt16, thread index: Int, of count: Int) -> ClosedRange<UInt16> {
        let total = Int(max) - Int(min) + 1
        let share = Swift.max(2, (total / Swift.max(1, count)) & ~1)
        let lower = Int(min) + index * share
        let upper = index == count - 1 ? Int(max) : Swift.min(Int(max), lower + share - 1)
        return UInt16(Swift.min(lower, Int(max)))...UInt16(Swift.max(Swift.min(lower, Int(max)), upper))
    }

    /// The search for a free port starts at `start` (reduced into the range): the core passes a
    /// number from its seeded generator, so runs are reproducible when the seed is.
    public init(range: ClosedRange<UInt16>, start: UInt64) {
        self.range = range
        inUse = Array(repeating: false, count: range.count)
        cursor = Int(start % UInt64(range.count))
    }

    public var freeCount: Int { range.count - usedCount }

    /// Takes a free port, trying the next ones if `accept` refuses (e.g. the port is bound by another process).
    public mutating func acquire(even: Bool = false, pair: Bool = false, accept: (UInt16) -> Bool) -> UInt16? {
        let n = inUse.count
        for step in 0..<n {
            let i = (cursor + step) % n
            let port = Int(range.lowerBound) + i
            if inUse[i] { continue }
            if even && port % 2 != 0 { continue }
            if pair && (i + 1 >= n || inUse[i + 1]) { continue }
            guard accept(UInt16(port)) else { continue }
            inUse[i] = true
            usedCount += 1
            cursor = (i + 1) % n
            return UInt16(port)
        }
        return nil
    }

    /// Marks a specific port used (the reserved half of an EVEN-PORT pair); false if already used.
    public mutating func claim(_ port: UInt16) -> Bool {
        guard range.contains(port) else { return false }
        let i = Int(port - range.lowerBound)
        if inUse[i] { return false }
        inUse[i] = true
        usedCount += 1
        return true
    }

    public mutating func release(_ port: UInt16) {
        guard range.contains(port) else { return }
        let i = Int(port - range.lowerBound)
        if inUse[i] {
            inUse[i] = false
            usedCount -= 1
        }
    }
}
