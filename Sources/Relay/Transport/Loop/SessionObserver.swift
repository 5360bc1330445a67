import RelayCore

/// Something that follows allocations' sessions (docs/architecture.md, "Session events"): the
/// log, the metrics, and later accounting or webhooks. A loop hands each of its observers every
/// `SessionEvent` its core emits, in order, on the loop's thread; an ended session's summary
/// already holds what the kernel relayed for it (`relayedOutside`).
protocol SessionObserver: AnyObject {
    func observe(_ event: SessionEvent)
}
