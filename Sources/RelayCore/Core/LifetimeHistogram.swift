/// How long allocations lived, observed once when each one ends: fixed buckets of plain
/// integers, one histogram per loop thread, summed at scrape time like `CoreCounters`.
public struct LifetimeHistogram: Sendable, Equatable {
    /// Upper bounds in seconds of the buckets below `+Inf` (a WebRTC call lasts seconds to hours;
    /// 600 s is the default allocation lifetime, 3600 s the default `max-allocate-lifetime`).
    public static let bounds: [Int64] = [10, 30, 60, 300, 600, 1800, 3600, 7200, 21600, 86400]

    /// Observations per bucket, not cumulative; the last slot holds those above every bound.
    public private(set) var counts: [UInt64]
    /// Sum of all observed lifetimes in seconds.
    public private(set) var sum: UInt64 = 0

    public init() { counts = [UInt64](repeating: 0, count: Self.bounds.count + 1) }

    /// Number of observations.
    public var count: UInt64 { counts.reduce(0, &+) }

    /// Records one allocation that lived `seconds` (negative values count as 0).
    public mutating func observe(seconds: Int64) {
        let s = max(0, seconds)
        var i = 0
        while i < Self.bounds.count && s > Self.bounds[i] { i += 1 }
        counts[i] &+= 1
        sum &+= UInt64(s)
    }

    /// Adds another thread's observations into these.
    public mutating func add(_ other: LifetimeHistogram) {
        for i in counts.indices { counts[i] &+= other.counts[i] }
        sum &+= other.sum
    }

    /// Cumulative counts per bound, as Prometheus `le` buckets want them; the last one is `+Inf`.
    public var cumulativeCounts: [UInt64] {
        var running: UInt64 = 0
        return counts.map { c in
            running &+= c
            return running
        }
    }
}
