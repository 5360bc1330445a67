import CMallocCounter

/// One benchmark's figures: time per operation and heap allocations per operation.
struct Measurement {
    let name: String
    /// Median over the runs, and the fastest and slowest run.
    let nsPerOp: (median: Double, min: Double, max: Double)
    /// malloc-family calls during the timed runs.
    let allocations: UInt64
    let operations: Int

    var allocationsPerOp: Double { Double(allocations) / Double(operations) }

    /// Runs `workload` once untimed (lazy globals such as the CRC-32 table are built on first
    /// use), then `runs` times `iterations`, counting malloc calls across the timed runs.
    static func run(
        _ name: String, iterations: Int, runs: Int = 5, _ workload: (Int) -> UInt64
    ) -> Measurement {
        blackHole(workload(min(iterations, 100_000)))
        var times: [Double] = []
        times.reserveCapacity(runs)
        var allocations: UInt64 = 0
        var sink: UInt64 = 0
        let clock = ContinuousClock()
        for _ in 0..<runs {
            relayd_malloc_reset()
            let start = clock.now
            sink &+= workload(iterations)
            let elapsed = start.duration(to: clock.now)
            allocations += relayd_malloc_count()
            let (seconds, attoseconds) = elapsed.components
            times.append((Double(seconds) * 1e9 + Double(attoseconds) / 1e9) / Double(iterations))
        }
        blackHole(sink)
        times.sort()
        return Measurement(
            name: name, nsPerOp: (times[runs / 2], times[0], times[runs - 1]), allocations: allocations,
            operations: runs * iterations)
    }
}

/// True when the malloc interposer of CMallocCounter sees this process's allocations; without
/// it every count would read 0 and the zero-allocation check would pass for nothing.
func mallocCounterIsLive() -> Bool {
    relayd_malloc_reset()
    let probe = opaque(UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 8))
    probe.deallocate()
    return relayd_malloc_count() > 0
}

/// `value` with `decimals` digits after the point (no Foundation formatting here).
func fixed(_ value: Double, decimals: Int) -> String {
    var scale = 1
    for _ in 0..<decimals { scale *= 10 }
    let scaled = Int((value * Double(scale)).rounded())
    let fraction = String(scaled % scale)
    let padded = String(repeating: "0", count: decimals - fraction.count) + fraction
    return decimals == 0 ? String(scaled) : "\(scaled / scale).\(padded)"
}

func leftAligned(_ text: String, _ width: Int) -> String {
    text + String(repeating: " ", count: max(0, width - text.count))
}

func rightAligned(_ text: String, _ width: Int) -> String {
    String(repeating: " ", count: max(0, width - text.count)) + text
}
