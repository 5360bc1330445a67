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
        /// Each configured tenant's own limits and reservations, by name (docs/tenants.md).
        public var tenants: [String: TenantLimits]

        public init(userQuota: Int = 0, totalQuota: Int = 0, bpsCapacity: Int = 0, tenants: [String: TenantLimits] = [:]) {
            self.userQuota = max(0, userQuota)
            self.totalQuota = max(0, totalQuota)
            self.bpsCapacity = max(0, bpsCapacity)
            self.tenants = tenants
        }
    }

    private struct State {
        var limits: Limits
        var total = 0
        var perUser: [String: Int] = [:]
        var reservedBPS = 0
        /// Allocations and reserved bandwidth of each tenant but the default one.
        var perTenant: [String: TenantUse] = [:]
        /// Allocations granted since the start, by tenant ("" the default one).
        var grantedPerTenant: [String: UInt64] = [:]
        /// In a cluster: keep the changes Redis has not been told of.
        var mirroring = false
        var deltas = QuotaDeltas()

        /// Takes one allocation of `request.user` and its bandwidth, or says which limit refused
        /// it. `checkUserQuota` false: the cluster decided `user-quota` across nodes already.
        mutating func take(_ request: AdmissionRequest, checkUserQuota: Bool) -> AdmissionDecision {
            let count = perUser[request.user, default: 0]
            let own = limits.tenants[request.tenant]
            let used = perTenant[request.tenant, default: TenantUse()]
            // The node's capacity less what other tenants reserved and do not use (docs/tenants.md).
            let held = unusedReservations(besides: request.tenant)
            if limits.totalQuota > 0 && total >= limits.totalQuota - held.allocations {
                return .refused(.init(.totalQuota))
            }
            if let own, own.totalQuota > 0 && used.allocations >= own.totalQuota { return .refused(.init(.totalQuota)) }
            let userQuota = own?.userQuota ?? limits.userQuota
            if checkUserQuota && userQuota > 0 && count >= userQuota { return .refused(.init(.userQuota)) }
            var bps = max(0, request.bytesPerSecond)
            if bps > 0 && limits.bpsCapacity > 0 {
                let capacity = limits.bpsCapacity - held.bytesPerSecond
                guard reservedBPS < capacity else { return .refused(.init(.bandwidth)) }
                bps = min(bps, capacity - reservedBPS)
            }
            if bps > 0, let own, own.bpsCapacity > 0 {
                guard used.bytesPerSecond < own.bpsCapacity else { return .refused(.init(.bandwidth)) }
                bps = min(bps, own.bpsCapacity - used.bytesPerSecond)
            }
            let lease = AdmissionLease(user: request.user, bytesPerSecond: bps, tenant: request.tenant)
            tally(lease, +1)
            grantedPerTenant[request.tenant, default: 0] &+= 1
            return .granted(lease)
        }

        /// Counts `lease` in (`+1`) or out (`-1`).
        mutating func tally(_ lease: AdmissionLease, _ sign: Int) {
            total = max(0, total + sign)
            let users = perUser[lease.user, default: 0] + sign
            perUser[lease.user] = users <= 0 ? nil : users
            reservedBPS = max(0, reservedBPS + sign * lease.bytesPerSecond)
            guard !lease.tenant.isEmpty else { return }
            var use = perTenant[lease.tenant, default: TenantUse()]
            use.allocations = max(0, use.allocations + sign)
            use.bytesPerSecond = max(0, use.bytesPerSecond + sign * lease.bytesPerSecond)
            perTenant[lease.tenant] = use.allocations == 0 && use.bytesPerSecond == 0 ? nil : use
        }

        /// What tenants other than `tenant` reserved (`reserve-allocations`, `reserve-bps`) and
        /// do not use yet: held back from everyone else.
        func unusedReservations(besides tenant: String) -> TenantUse {
            var held = TenantUse()
            for (name, own) in limits.tenants where name != tenant {
                let used = perTenant[name, default: TenantUse()]
                held.allocations += max(0, own.reservedAllocations - used.allocations)
                held.bytesPerSecond += max(0, own.reservedBPS - used.bytesPerSecond)
            }
            return held
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
            let counted = AdmissionLease(user: lease.user, bytesPerSecond: bps, tenant: lease.tenant)
            s.tally(counted, +1)
            if s.mirroring { s.deltas.add(user: lease.user, 1) }
            return counted
        }
    }

    public func release(_ lease: AdmissionLease) {
        state.withLock { s in
            s.tally(lease, -1)
            if s.mirroring { s.deltas.add(user: lease.user, -1) }
        }
    }

    /// Alone, the node knows no other node.
    public func alternate(family: IPAddress.Family, transport: TransportProtocol) -> TransportAddress? { nil }

    /// New limits after a reload.
    public func update(limits: Limits) { state.withLock { $0.limits = limits } }

    public var limits: Limits { state.withLock { $0.limits } }
    /// The `user-quota` of `tenant`'s users: its own, else the node's (docs/tenants.md).
    public func userQuota(ofTenant tenant: String) -> Int {
        state.withLock { $0.limits.tenants[tenant]?.userQuota ?? $0.limits.userQuota }
    }
    /// Allocations this node holds (granted leases not yet released).
    public var total: Int { state.withLock { $0.total } }
    /// This node's allocations of `user`.
    public func count(user: String) -> Int { state.withLock { $0.perUser[user, default: 0] } }
    /// Each tenant's allocations on this node now and granted since the start, "" the default
    /// tenant (docs/tenants.md, metrics).
    public var tenantCounts: [String: (live: Int, granted: UInt64)] {
        state.withLock { s in
            var counts: [String: (live: Int, granted: UInt64)] = [:]
            var others = 0
            for (name, use) in s.perTenant {
                counts[name] = (use.allocations, s.grantedPerTenant[name] ?? 0)
                others += use.allocations
            }
            for (name, granted) in s.grantedPerTenant where counts[name] == nil { counts[name] = (0, granted) }
            counts[""] = (max(0, s.total - others), s.grantedPerTenant[""] ?? 0)
            return counts
        }
    }
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

/// One tenant's own limits on a node (docs/tenants.md); 0 means none. `userQuota` nil: the
/// node's `user-quota`.
public struct TenantLimits: Sendable, Equatable {
    public var userQuota: Int?
    public var totalQuota: Int
    public var bpsCapacity: Int
    /// Allocations and bytes per second held for this tenant alone (`reserve-allocations`,
    /// `reserve-bps`): the other tenants are capped at `total-quota` and `bps-capacity` less
    /// what it reserved and does not use.
    public var reservedAllocations: Int
    public var reservedBPS: Int

    public init(
        userQuota: Int? = nil, totalQuota: Int = 0, bpsCapacity: Int = 0, reservedAllocations: Int = 0,
        reservedBPS: Int = 0
    ) {
        self.userQuota = userQuota.map { max(0, $0) }
        self.totalQuota = max(0, totalQuota)
        self.bpsCapacity = max(0, bpsCapacity)
        self.reservedAllocations = max(0, reservedAllocations)
        self.reservedBPS = max(0, reservedBPS)
    }
}

/// What one tenant holds on a node: allocations, and bytes per second reserved from `bps-capacity`.
public struct TenantUse: Sendable, Equatable {
    public var allocations = 0
    public var bytesPerSecond = 0

    public init(allocations: Int = 0, bytesPerSecond: Int = 0) {
        self.allocations = allocations
        self.bytesPerSecond = bytesPerSecond
    }
}
