import RelayCore

/// What the admin API needs from the running server (docs/admin.md): the live allocations of
/// every loop thread, a way to end them, and the user blocklist. `RelayServer` provides it; the
/// router calls it on the main thread.
public protocol AdminControl: AnyObject {
    /// One page of the allocations `selector` names over every loop thread: at most `limit`, in
    /// session order, after session `after`; nil when a loop did not answer in time. `tenant`:
    /// only that tenant's allocations (docs/tenants.md); nil: every tenant's.
    func allocations(_ selector: AllocationSelector, tenant: String?, after: String?, limit: Int) -> AllocationPageResult?
    /// Ends the allocations `selector` names on every loop thread (of `tenant` only, when given);
    /// how many, nil when a loop did not answer in time (it still ends them when it gets to the
    /// request).
    func terminate(_ selector: AllocationSelector, tenant: String?) -> Int?
    /// The users with live allocations, summed over every loop thread; nil as above.
    func userTraffic() -> [UserTraffic]?
    var blocklist: UserBlocklist { get }
    /// Sets a block and keeps it (`state-dir`, the cluster: docs/admin.md, "Blocks that last");
    /// false when the blocklist is full.
    func setBlock(_ entry: UserBlocklist.Entry) -> Bool
    /// Lifts a block here and wherever it is kept (`by`: the admin key's name); false when there
    /// was none here.
    func liftBlock(_ user: String, by: String) -> Bool
    /// Starts this binary again and hands it the node's sockets and the allocations that can move (a live
    /// upgrade, docs/live-upgrade.md); returns once the heir serves or the upgrade failed.
    func upgrade(trigger: String) -> UpgradeOutcome
}

/// How a live upgrade went (docs/live-upgrade.md).
public enum UpgradeOutcome: Sendable, Equatable {
    /// The heir (`pid`) serves; `allocations` allocations went over (UDP, TCP and TLS clients).
    case succeeded(pid: Int32, allocations: Int)
    /// Nothing changed: the running process serves on.
    case failed(String)
}

/// A page of allocations over every loop thread.
public struct AllocationPageResult: Sendable {
    public var records: [AllocationRecord]
    /// Allocations the selector names, on every page.
    public var total: Int
    /// Whether allocations after the last of `records` exist.
    public var more: Bool

    public init(records: [AllocationRecord], total: Int, more: Bool) {
        self.records = records
        self.total = total
        self.more = more
    }
}
