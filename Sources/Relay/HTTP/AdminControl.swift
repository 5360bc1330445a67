import RelayCore

/// What the admin API needs from the running server (docs/admin.md): the live allocations of
/// every loop thread, a way to end them, and the user blocklist. `RelayServer` provides it; the
/// router calls it on the main thread.
public protocol AdminControl: AnyObject {
    /// Every loop thread's allocations that `selector` names; nil when a loop did not answer in time.
    func allocations(_ selector: AllocationSelector) -> [AllocationRecord]?
    /// Ends the allocations `selector` names on every loop thread; how many, nil when a loop did
    /// not answer in time (it still ends them when it gets to the request).
    func terminate(_ selector: AllocationSelector) -> Int?
    /// The users with live allocations, summed over every loop thread; nil as above.
    func userTraffic() -> [UserTraffic]?
    var blocklist: UserBlocklist { get }
}
