import RelayCore

/// Sessions in the metrics: how long allocations lived, observed as each ends
/// (`relayd_allocation_lifetime_seconds`, docs/metrics.md). One per loop, read by the loop's
/// metrics snapshot.
final class SessionMetrics: SessionObserver {
    private(set) var lifetimes = LifetimeHistogram()

    func observe(_ event: SessionEvent) {
        guard case .ended(let summary) = event else { return }
        lifetimes.observe(seconds: summary.durationSeconds)
    }
}
