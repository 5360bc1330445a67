import Glibc

/// Sends `total` frames at `rate` a second in small bursts, from `start` (CLOCK_MONOTONIC
/// nanoseconds). A burst is due every 500 µs or so (each call costs the kernel about 20 µs of set-up,
/// whatever it sends); when the sender falls behind, it sends what is due at once (at most 4,096
/// frames a call) until it has caught up or sent them all.
struct Pacer {
    let rate: Double
    let total: Int
    let burst: Int

    init(rate: Double, duration: Double) {
        self.rate = rate
        total = Int(rate * duration)
        burst = max(1, min(1_024, Int(rate / 2_000)))
    }

    /// Runs `send(count)` until `total` frames are out; returns the monotonic time of the end.
    func run(from start: UInt64, _ send: (Int) throws(LoadgenError) -> Void) throws(LoadgenError) -> UInt64 {
        var sent = 0
        while sent < total {
            let now = Monotonic.now()
            let due = now <= start ? 0 : min(total, Int(rate * Double(now - start) / 1e9))
            if due - sent >= burst || (due == total && sent < total) {
                let count = min(due - sent, 4_096)
                try send(count)
                sent += count
                continue
            }
            let next = start + UInt64(Double(sent + burst) / rate * 1e9)
            Monotonic.sleep(until: min(next, start + UInt64(Double(total) / rate * 1e9)))
        }
        return Monotonic.now()
    }
}

/// CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns().
enum Monotonic {
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func sleep(until deadline: UInt64) {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }

    /// The monotonic time at which CLOCK_REALTIME reads `realtime` nanoseconds.
    static func fromRealtime(_ realtime: UInt64) -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let nowRealtime = UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
        let now = now()
        return realtime > nowRealtime ? now + (realtime - nowRealtime) : now
    }
}
