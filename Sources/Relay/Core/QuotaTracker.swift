import Synchronization

/// Counts allocations per user and in total across all loop threads (`user-quota`,
/// `total-quota`; RFC 8656 §7.2 answers 486 and 508). Touched only when allocations are
/// created or deleted, never on the data path.
public final class QuotaTracker: Sendable {
    private struct State {
        var total = 0
        var perUser: [String: Int] = [:]
    }

    private let state = Mutex(State())
    public let userQuota: Int
    public let totalQuota: Int

    /// Quotas of 0 mean unlimited.
    public init(userQuota: Int, totalQuota: Int) {
        self.userQuota = userQuota
        self.totalQuota = totalQuota
    }

    /// Reserves one allocation for `user`, or says which quota refused it.
    public func acquire(user: String) -> RelayError? {
        state.withLock { s in
            if totalQuota > 0 && s.total >= totalQuota { return .insufficientCapacity }
            let count = s.perUser[user, default: 0]
            if userQuota > 0 && count >= userQuota { return .allocationQuotaReached }
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
