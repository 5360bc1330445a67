import StunCodec

/// The node's own admission (docs/architecture.md, "Admission"): allocations counted per user
/// and in total against `user-quota` and `total-quota` (RFC 8656 §7.2 answers 486 and 508),
/// `max-bps` reserved from `bps-capacity`, and the operator's blocks. One lock over the counts
/// and the reserved bandwidth, so a grant takes both or neither. Touched when allocations are
/// created or end, never on the data path.
///
/// In a cluster (docs/cluster.md) it also keeps what changed since the cluster ledger last told
/// Redis (`startMirroring`, `takeDeltas`), and takes grants Redis counted already
/// (`admitCounted`).
public final class LocalAdmissionLedger: AdmissionLedger {
    /// The limits a reload may change; 0 means unlimited. Live allocations are never ended by a
    /// lower limit: it gates new ones.
    public struct Limits: Sendable, Equatable {
        public var userQuota: Int
        public var totalQuota: Int
        public var bpsCapacity: Int

        public init(userQuota: Int = 0, totalQuota: Int = 0, bpsCapacity: Int = 0) {
            self.userQuota = max(0, userQuota)
            self.totalQuota = max(0, totalQuota)
            self.bpsCapacity = max(0, bpsCapacity)
        }
    }

    private struct State {
        var limits: Limits
        var total = 0
        var perUser: [String: Int] = [:]
        var reservedBPS = 0
        /// In a cluster: keep the changes Redis has not been told of.
        var mirroring = false
        var deltas = QuotaDeltas()

        /// Takes one allocation of `request.user` and its bandwidth, or says which limit refused
        /// it. `checkUserQuota` false: the cluster decided `user-quota` across nodes already.
        mutating func take(_ request: AdmissionRequest, checkUserQuota: Bool) -> AdmissionDecision {
            let count = perUser[request.user, default: 0]
            if limits.totalQuota > 0 && total >= limits.totalQuota { return .refused(.init(.totalQuota)) }
            if checkUserQuota && limits.userQuota > 0 && count >= limits.userQuota {
                return .refused(.init(.userQuota))
            }
            var bps = max(0, request.bytesPerSecond)
            if bps > 0 && limits.bpsCapacity > 0 {
                guard reservedBPS < limits.bpsCapacity else { return .refused(.init(.bandwidth)) }
                bps = min(bps, limits.bpsCapacity - reservedBPS)
            }
            reservedBPS += bps
            total += 1
            perUser[request.user] = count + 1
            return .granted(AdmissionLease(user: request.user, bytesPerSecond: bps))
        }
    }

    private let state: Locked<State>
    /// Users an operator refused new allocations to (docs/admin.md); kept across reloads.
    public let blocklist: UserBlocklist

    public init(limits: Limits = Limits(), blocklist: UserBlocklist = UserBlocklist()) {
        state = Locked(State(limits: limits))
        self.blocklist = blocklist
    }

    public func admit(_ request: AdmissionRequest) -> AdmissionDecision {
        if blocklist.isBlocked(request.user, now: request.wallTime) { return .refused(.init(.blocked)) }
        return state.withLock { s in
            let decision = s.take(request, checkUserQuota: true)
            if s.mirroring, case .granted = decision { s.deltas.add(user: request.user, 1) }
            return decision
        }
    }

    /// A grant Redis already counts for this node (the cluster's `user-quota` passed): this
    /// node's `total-quota`, `bps-capacity` and blocks still apply, and a refusal here hands
    /// Redis's count back.
    public func admitCounted(_ request: AdmissionRequest) -> AdmissionDecision {
        let blocked = blocklist.isBlocked(request.user, now: request.wallTime)
        return state.withLock { s in
            let decision = blocked ? .refused(.init(.blocked)) : s.take(request, checkUserQuota: false)
            if s.mirroring, case .refused = decision { s.deltas.add(user: request.user, -1) }
            return decision
        }
    }

    public func readmit(_ lease: AdmissionLease) -> AdmissionLease {
        state.withLock { s in
            var bps = max(0, lease.bytesPerSecond)
            if s.limits.bpsCapacity > 0 { bps = min(bps, max(0, s.limits.bpsCapacity - s.reservedBPS)) }
            s.reservedBPS += bps
            s.total += 1
            s.perUser[lease.user, default: 0] += 1
            if s.mirroring { s.deltas.add(user: lease.user, 1) }
            return AdmissionLease(user: lease.user, bytesPerSecond: bps)
        }
    }

    public func release(_ lease: AdmissionLease) {
        state.withLock { s in
            s.total = max(0, s.total - 1)
            if let count = s.perUser[lease.user] {
                s.perUser[lease.user] = count <= 1 ? nil : count - 1
            }
            s.reservedBPS = max(0, s.reservedBPS - lease.bytesPerSecond)
            if s.mirroring { s.deltas.add(user: lease.user, -1) }
        }
    }

    /// Alone, the node knows no other node.
    public func alternate(family: IPAddress.Family, transport: TransportProtocol) -> TransportAddress? { nil }

    /// New limits after a reload.
    public func update(limits: Limits) { state.withLock { $0.limits = limits } }

    public var limits: Limits { state.withLock { $0.limits } }
    /// Allocations this node holds (granted leases not yet released).
    public var total: Int { state.withLock { $0.total } }
    /// This node's allocations of `user`.
    public func count(user: String) -> Int { state.withLock { $0.perUser[user, default: 0] } }
    /// Bytes per second reserved from `bps-capacity` by live leases.
    public var reservedBytesPerSecond: Int { state.withLock { $0.reservedBPS } }

    // MARK: Mirroring to the cluster

    /// Starts keeping the changes a cluster ledger must tell Redis.
    public func startMirroring() { state.withLock { $0.mirroring = true } }

    /// The changes since the last call (applied to Redis in order).
    public func takeDeltas() -> QuotaDeltas {
        state.withLock { s in
            defer { s.deltas = QuotaDeltas() }
            return s.deltas
        }
    }

    /// Every user's count and the total, for writing this node's share to Redis anew; the
    /// pending changes are part of it, so they are dropped.
    public func snapshotForMirror() -> (perUser: [String: Int], total: Int) {
        state.withLock { s in
            s.deltas = QuotaDeltas()
            return (s.perUser, s.total)
        }
    }
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
