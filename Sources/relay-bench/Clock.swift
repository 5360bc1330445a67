import Glibc

/// The monotonic clock in nanoseconds; both ends of a one-way measurement run on this host,
/// so send and receive timestamps share the clock.
enum Clock {
    /// Nanoseconds since an arbitrary fixed point (CLOCK_MONOTONIC).
    @inline(__always)
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// Sleeps until the monotonic clock reaches `deadline` (ns).
    static func sleep(until deadline: UInt64) {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }

    /// Sleeps for `nanoseconds`.
    static func sleep(nanoseconds: UInt64) { sleep(until: now() &+ nanoseconds) }
}
