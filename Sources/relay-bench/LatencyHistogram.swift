/// A fixed-size log-linear histogram of nanosecond values (32 sub-buckets per power of two,
/// about 3 % resolution): recording is an index computation and an increment, no allocation.
final class LatencyHistogram {
    static let subBits = 5
    static let subCount = 1 << subBits
    static let bucketCount = (64 - subBits) * subCount
    let counts: UnsafeMutablePointer<UInt64>
    private(set) var total: UInt64 = 0
    private(set) var maximum: UInt64 = 0

    init() {
        counts = .allocate(capacity: Self.bucketCount)
        counts.initialize(repeating: 0, count: Self.bucketCount)
    }

    deinit { counts.deallocate() }

    @inline(__always)
    static func index(_ value: UInt64) -> Int {
        if value < UInt64(subCount) { return Int(value) }
        let exponent = 63 - value.leadingZeroBitCount - subBits  // ≥ 0
        let mantissa = Int(value >> UInt64(exponent)) & (subCount - 1)
        return (exponent + 1) * subCount + mantissa
    }

    /// The smallest value of bucket `index`.
    static func lowerBound(_ index: Int) -> UInt64 {
        if index < subCount { return UInt64(index) }
        let exponent = index / subCount - 1
        let mantissa = UInt64(index % subCount) | UInt64(subCount)
        return mantissa << UInt64(exponent)
    }

    @inline(__always)
    func record(_ value: UInt64) {
        counts[Self.index(value)] &+= 1
        total &+= 1
        if value > maximum { maximum = value }
    }

    /// The value at quantile `q` (0–1): the middle of the bucket holding it.
    func quantile(_ q: Double) -> UInt64 {
        guard total > 0 else { return 0 }
        let rank = UInt64((Double(total) * q).rounded(.up))
        var seen: UInt64 = 0
        for i in 0..<Self.bucketCount {
            seen += counts[i]
            if seen >= max(rank, 1) {
                let low = Self.lowerBound(i)
                let high = i + 1 < Self.bucketCount ? Self.lowerBound(i + 1) : low
                return min((low + high) / 2, maximum)
            }
        }
        return maximum
    }
}
