/// Thread ownership (docs/architecture.md, "Threads"): a core belongs to one loop thread and is
/// never locked, so every entry point must be called on that thread. Debug builds check it, as
/// swift-nio's `preconditionInEventLoop` does; release builds compile the check away.
extension RelayCore {
    /// Traps in a debug build when the caller is not on the thread that owns this core (as
    /// `ownerCheck` answers; without one, nothing is checked: tests and tools drive a core from
    /// whichever thread made it).
    @inline(__always)
    func assertOwned(_ function: StaticString = #function) {
        assert(ownerCheck?() ?? true, "RelayCore.\(function) called off the thread of its loop")
    }
}
