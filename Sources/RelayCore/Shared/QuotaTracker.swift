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
        /// In a cluster, what changed since the agent last told Redis (docs/cluster.md).
        var mirroring = false
        var pending = QuotaDeltas()
        /// Counts Redis granted that no loop has taken or handed back yet (in a mailbox): part
        /// of this node's share when it is written anew.
        var outstanding: [String: Int] = [:]

        mutating func takeOutstanding(_ user: String) {
            guard let count = outstanding[user] else { return }
            outstanding[user] = count <= 1 ? nil : count - 1
        }
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

    /// Reserves one allocation for `user`, or says which quota refused it. `counted`: Redis
    /// already counts it for this node (`ClusterAdmission.granted`), so a refusal here hands that
    /// count back and a success adds nothing to tell Redis.
    public func acquire(user: String, counted: Bool = false) -> RelayError? {
        state.withLock { s in
            let count = s.perUser[user, default: 0]
            if counted { s.takeOutstanding(user) }
            var refusal: RelayError? = nil
            if s.totalQuota > 0 && s.total >= s.totalQuota {
                refusal = .insufficientCapacity
            } else if s.userQuota > 0 && count >= s.userQuota && !counted {
                // With `counted`, Redis decided `user-quota` across the cluster already.
                refusal = .allocationQuotaReached
            }
            if let refusal {
                if counted && s.mirroring { s.pending.add(user: user, -1) }
                return refusal
            }
            s.total += 1
            s.perUser[user] = count + 1
            if !counted && s.mirroring { s.pending.add(user: user, 1) }
            return nil
        }
    }

    public func release(user: String) {
        state.withLock { s in
            s.total = max(0, s.total - 1)
            if let count = s.perUser[user] {
                if count <= 1 { s.perUser[user] = nil } else { s.perUser[user] = count - 1 }
            }
            if s.mirroring { s.pending.add(user: user, -1) }
        }
    }

    /// Hands back a count Redis holds for this node that no allocation took (a granted Allocate
    /// that turned out to be a retransmission).
    public func returnCounted(user: String) {
        state.withLock { s in
            s.takeOutstanding(user)
            if s.mirroring { s.pending.add(user: user, -1) }
        }
    }

    /// The agent's note of a count Redis granted, before the answer goes to its loop.
    public func noteGranted(user: String) {
        state.withLock { $0.outstanding[user, default: 0] += 1 }
    }

    /// This node's allocations of `user`.
    public func count(user: String) -> Int { state.withLock { $0.perUser[user, default: 0] } }

    /// Starts keeping the changes a cluster agent must tell Redis.
    public func startMirroring() { state.withLock { $0.mirroring = true } }

    /// The changes since the last call (the agent applies them in order).
    public func takeDeltas() -> QuotaDeltas {
        state.withLock { s in
            defer { s.pending = QuotaDeltas() }
            return s.pending
        }
    }

    /// Every user's count and the total, for writing this node's share to Redis anew; the
    /// pending changes are part of it, so they are dropped.
    public func snapshotForMirror() -> (perUser: [String: Int], total: Int) {
        state.withLock { s in
            s.pending = QuotaDeltas()
            var perUser = s.perUser
            var total = s.total
            for (user, count) in s.outstanding {
                perUser[user, default: 0] += count
                total += count
            }
            return (perUser, total)
        }
    }

    public var total: Int { state.withLock { $0.total } }
}

/// Changes to this node's allocation counts not yet written to Redis, summed per user.
public struct QuotaDeltas: Sendable, Equatable {
    public private(set) var perUser: [String: Int] = [:]
    public private(set) var total = 0

    public init() {}

    public var isEmpty: Bool { perUser.isEmpty && total == 0 }

    mutating func add(user: String, _ delta: Int) {
        let next = perUser[user, default: 0] + delta
        perUser[user] = next == 0 ? nil : next
        total += delta
    }
}
