import Synchronization

/// The server's `bps-capacity`: the bytes a second all allocations together may be granted.
/// Each new allocation reserves its `max-bps` from it, or what is left when less than that is;
/// when nothing is left the Allocate is refused with 486 (Allocation Quota Reached, RFC 8656
/// §7.2), as coturn answers "Allocation Bandwidth Quota Reached". The reservation is returned
/// when the allocation ends. Shared by all loop threads; touched only when allocations are
/// created or deleted, never on the data path.
public final class BandwidthCapacity: Sendable {
    private struct State {
        var capacity: Int
        var reserved = 0
    }

    private let state: Locked<State>

    /// A capacity of 0 means unlimited: every allocation gets its whole `max-bps`.
    public init(capacity: Int) {
        state = Locked(State(capacity: max(capacity, 0)))
    }

    /// A new capacity after a reload: it gates new allocations; live ones keep what they reserved.
    public func update(capacity: Int) {
        state.withLock { $0.capacity = max(capacity, 0) }
    }

    /// Reserves up to `bytesPerSecond` (> 0) for a new allocation and returns what was granted,
    /// or nil when the capacity is used up.
    public func reserve(_ bytesPerSecond: Int) -> Int? {
        state.withLock { s in
            var granted = bytesPerSecond
            if s.capacity > 0 {
                guard s.reserved < s.capacity else { return nil }
                granted = min(granted, s.capacity - s.reserved)
            }
            s.reserved += granted
            return granted
        }
    }

    /// Returns an ended allocation's reservation.
    public func release(_ bytesPerSecond: Int) {
        state.withLock { $0.reserved = max(0, $0.reserved - bytesPerSecond) }
    }

    /// Bytes a second reserved by live allocations.
    public var reserved: Int { state.withLock { $0.reserved } }
    public var capacity: Int { state.withLock { $0.capacity } }
}
