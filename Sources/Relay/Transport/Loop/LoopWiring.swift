import FastPath
import RelayCore

/// What a loop thread is given when it is made (docs/architecture.md, "Threads"): its place among
/// the node's loops and the node-wide services it uses. Nothing is wired into a loop later.
struct LoopWiring {
    var index: LoopIndex
    /// Every loop's mailbox, this loop's at `index`: where forwarded requests, pipes to end and
    /// admission decisions are posted.
    var mailboxes: [LoopMailbox]
    /// The TCP, TLS and DTLS listeners' addresses, TLS contexts and connection limits.
    var streams: StreamService
    /// The kernel fast path, when it runs (docs/kernel-fast-path.md).
    var fastPath: KernelFastPath? = nil
    /// The RFC 6062 pipes' sockmap program, when it runs (docs/tcp-relay.md, "In the kernel").
    var splice: KernelSplice? = nil
    /// Where this loop publishes its metrics snapshots; nil: nowhere.
    var metrics: MetricsRegistry.Slot? = nil
    /// The loop's state journal (docs/state-journal.md), when a `state-dir` is set.
    var journal: Journal? = nil
    /// What a live upgrade handed this process (docs/live-upgrade.md): sockets to use instead
    /// of opening new ones. Nil unless this process is an heir.
    var inheritance: Inheritance? = nil
    /// The UDP allocations to restore whose clients this loop serves: from the state journal
    /// after a crash, or handed over by a live upgrade.
    var restore: [JournalAllocation] = []
    /// EVEN-PORT reservations a live upgrade handed over or the state journal kept, by token
    /// (loop 0 only): any loop's Allocate may take one, this loop sweeps them.
    var reservations: [UInt64: JournalReservation] = [:]
    /// Makes, on the loop's thread, who follows its sessions besides the log and the metrics
    /// (accounting, tests): observers belong to one loop and are never shared.
    var sessionObservers: @Sendable () -> [any SessionObserver] = { [] }
    /// Asks the user database for a user its view lacks (docs/userdb.md); the answer comes back
    /// as `LoopMail.userLookedUp`. Nil without a user database: the answer is "none" at once.
    var lookUpUser: (@Sendable (UserLookup) -> Void)? = nil

    struct Journal: Sendable {
        var path: String
        var bootID: BootID
        /// The secrets each compacted journal keeps.
        var keys: [JournalKey]
        /// Journals refused at start-up, for the metrics (loop 0 only, so the sum says it once).
        var refusedJournals: UInt64 = 0
    }
}
