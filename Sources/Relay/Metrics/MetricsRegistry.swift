import RelayCore
import Synchronization

/// Where loop threads publish their metrics and the scrape sums them: one lock-protected slot
/// per loop thread, written by that thread a few times a second (never on the packet path),
/// read by the HTTP thread at scrape time.
public final class MetricsRegistry: Sendable {
    /// One loop thread's latest `LoopMetrics`.
    public final class Slot: Sendable {
        private let latest = Locked(LoopMetrics())

        /// Replaces the published value; the old one is released outside the lock.
        public func publish(_ metrics: LoopMetrics) {
            var value = metrics
            latest.withLock { swap(&$0, &value) }
        }

        func add(into total: inout LoopMetrics) { latest.withLock { total.add($0) } }
    }

    public let slots: [Slot]
    /// What a live upgrade's predecessor had counted: `/metrics` adds it to the counters.
    public let carried: CarriedCounters

    public init(threads: Int, carried: CarriedCounters = CarriedCounters()) {
        slots = (0..<max(1, threads)).map { _ in Slot() }
        self.carried = carried
    }

    /// The sum over every loop thread's latest snapshot.
    public func total() -> LoopMetrics {
        var total = LoopMetrics()
        for slot in slots { slot.add(into: &total) }
        return total
    }
}
