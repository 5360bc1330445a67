/// The longest lifetimes and the most permissions a restored allocation may have: the protocol's
/// limits as this node is configured (`init(settings:)`). The reader restores nothing it cannot
/// check against them, whatever the journal says.
public struct JournalBounds: Sendable, Equatable {
    /// The longest allocation lifetime (`max-allocate-lifetime`, RFC 8656 §7.2, §7.3).
    public var allocationLifetime: Int64
    /// A permission's lifetime (RFC 8656 §9: 300 s).
    public var permissionLifetime: Int64
    /// A channel binding's lifetime (RFC 8656 §12: 600 s).
    public var channelLifetime: Int64
    /// How long an EVEN-PORT reservation holds its port (RFC 8656 §7.2; the core keeps 30 s).
    public var reservationLifetime: Int64
    /// Permissions one allocation may hold (`max-permissions-per-allocation`); at most 65,535.
    public var permissionsPerAllocation: Int
    /// Whether allocations of TCP and TLS clients are read: a live upgrade's snapshot holds them
    /// (their connections are handed over beside it, docs/live-upgrade.md); a journal on disk
    /// never does, since such an allocation ends with its connection (RFC 8656 §3.1).
    public var streamClients = false

    public init(
        allocationLifetime: Int64 = 3600, permissionLifetime: Int64 = 300, channelLifetime: Int64 = 600,
        reservationLifetime: Int64 = 30, permissionsPerAllocation: Int = 32
    ) {
        self.allocationLifetime = allocationLifetime
        self.permissionLifetime = permissionLifetime
        self.channelLifetime = channelLifetime
        self.reservationLifetime = reservationLifetime
        self.permissionsPerAllocation = permissionsPerAllocation
    }

    /// The bounds a core with `settings` keeps to.
    public init(settings: CoreSettings) {
        self.init(
            allocationLifetime: Int64(settings.maxAllocateLifetime),
            permissionLifetime: Int64(settings.permissionLifetime), channelLifetime: Int64(settings.channelLifetime),
            permissionsPerAllocation: settings.maxPermissionsPerAllocation)
    }

    /// What the format itself can hold: the writer checks its records against these, so it never
    /// writes what no reader could read.
    public static let format = JournalBounds(
        allocationLifetime: .max, permissionLifetime: .max, channelLifetime: .max, reservationLifetime: .max,
        permissionsPerAllocation: Int(UInt16.max))
}
