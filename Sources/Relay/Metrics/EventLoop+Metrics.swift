/// A loop's metrics snapshot: the core's counters and what its transports and fast path add,
/// published to the loop's slot of the registry that `/metrics` sums (docs/metrics.md).
extension EventLoop {
    func publishMetrics() {
        guard let slot = wiring.metrics else { return }
        var snapshot = LoopMetrics(capturing: core, now: EventLoop.now())
        snapshot.lifetimes.add(sessionMetrics.lifetimes)
        snapshot.sendFailures = sender.failed
        snapshot.stateRestored = restoreCounts.restored
        snapshot.stateNotRestored = restoreCounts.notRestored
        snapshot.stateJournalsRefused = wiring.journal?.refusedJournals ?? 0
        snapshot.stateJournalWriteFailures = journal?.failures ?? 0
        stream.contribute(to: &snapshot)
        dtls.contribute(to: &snapshot)
        fastPath?.contribute(to: &snapshot, isFirstLoop: wiring.index.value == 0)
        slot.publish(snapshot)
    }
}
