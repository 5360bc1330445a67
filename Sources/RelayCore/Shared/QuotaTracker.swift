import Synchronization

/// Counts allocations per user and in total across all loop threads (`user-quota`,
/// `total-quota`; RFC 8656 §7.2 answers 486 and 508). Touched only when allocations are
/// created or deleted, never on the data path.
public final class QuotaTracker: Sendable {
    private struct State {
        var total = 0
        var perUser: [String: Int] = [:]
        var userQuota: Int
        var totalQuota: Int
    }

    private let state: Locked<State>

    /// Quotas of 0 mean unlimited.
    public init(userQuota: Int, totalQuota: Int) {
        state = Locked(State(userQuota: userQuota, totalQuota: totalQuota))
    }

    public var userQuota: Int { state.withLock { $0.userQuota } }
    public var totalQuota: Int { state.withLock { $0.totalQuota } }

    /// New quotas after a reload: they gate new allocations; live ones are never ended by a lower quota.
    public func update(userQuota: Int, totalQuota: Int) {
        state.withLock {
            $0.userQuota = userQuota
            $0.totalQuota = totalQuota
        }
    }

    /// Reserves one allocation for `user`, or says which quota refused it.
    public func acquire(user: String) -> RelayError? {
        state.withLock { s in
            if s.totalQuota > 0 && s.total >= s.totalQuota { return .insufficientCapacity }
            let count = s.perUser[user, default: 0]
            if s.userQuota > 0 && count >= s.userQuota { return .allocationQuotaReached }
            s.total += 1
            s.perUser[user] = count + 1
            return nil
        }
    }

    public func release(user: String) {
        state.withLock { s in
            s.total = max(0, s.total - 1)
            if let count = s.perUser[user] {
                if count <= 1 { s.perUser[user] = nil } else { s.perUser[user] = count - 1 }
            }
        }
    }

    public var total: Int { state.withLock { $0.total } }
}
