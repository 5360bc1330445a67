import StunCodec

/// The one owner of whether an Allocate may take a share of the node (docs/architecture.md,
/// "Admission"): `user-quota`, `total-quota`, `bps-capacity`, the operator's blocks and, in a
/// cluster, the quotas counted across nodes. A core asks it once per authenticated Allocate
/// (RFC 8656 §7.2) and gets an answer at once: granted with a lease, refused, or pending with a
/// ticket that comes back later through `RelayCore.resumeAllocate`. Every lease is released
/// exactly once, which gives back exactly what it reserved; no caller pairs counts by hand.
///
/// Called from every loop thread: implementations are thread-safe and never block on the
/// network (a cluster ledger answers `.pending` and asks Redis elsewhere).
public protocol AdmissionLedger: AnyObject, Sendable {
    /// Whether `request` may allocate now.
    func admit(_ request: AdmissionRequest) -> AdmissionDecision
    /// Gives back what `lease` reserved (the allocation ended, or never came to be).
    func release(_ lease: AdmissionLease)
    /// Counts an allocation that is live already (adopted from another process or a snapshot,
    /// `RelayCore.adopt`): never refused, it takes its user's share and up to its `max-bps` of
    /// what `bps-capacity` has left. The lease returned is what was counted.
    func readmit(_ lease: AdmissionLease) -> AdmissionLease
    /// Where to send a client this node cannot serve (RFC 8489 §10, ALTERNATE-SERVER): the least
    /// loaded other node of the cluster reachable in `family` over `transport`; nil alone.
    func alternate(family: IPAddress.Family, transport: TransportProtocol) -> TransportAddress?
}

/// What an Allocate asks the ledger for.
public struct AdmissionRequest: Sendable, Equatable {
    /// The user id the quotas count (the part of a REST username after the separator).
    public var user: String
    /// The `max-bps` to reserve from `bps-capacity`; 0: no bandwidth limit.
    public var bytesPerSecond: Int
    /// The client's address family and transport, for a redirect.
    public var family: IPAddress.Family
    public var transport: TransportProtocol
    /// Unix time, for blocks that expire.
    public var wallTime: Int64
    /// Names the request if its answer is `.pending`.
    public var ticket: AdmissionTicket
    /// The tenant's name (docs/tenants.md), for its own quotas and reservations; empty for the
    /// default tenant.
    public var tenant: String

    public init(
        user: String, bytesPerSecond: Int, family: IPAddress.Family, transport: TransportProtocol, wallTime: Int64,
        ticket: AdmissionTicket, tenant: String = ""
    ) {
        self.tenant = tenant
        self.user = user
        self.bytesPerSecond = bytesPerSecond
        self.family = family
        self.transport = transport
        self.wallTime = wallTime
        self.ticket = ticket
    }
}

/// Names one pending Allocate: the loop that holds it and a serial unique on that loop.
public struct AdmissionTicket: Sendable, Hashable, CustomStringConvertible {
    public var loop: LoopIndex
    public var serial: UInt64

    public init(loop: LoopIndex, serial: UInt64) {
        self.loop = loop
        self.serial = serial
    }

    public var description: String { "\(loop.value)/\(serial)" }
}

/// What a granted Allocate holds until it ends: one allocation of `user` and the `max-bps` it
/// reserved (possibly less than asked when `bps-capacity` was nearly spent; 0: none).
public struct AdmissionLease: Sendable, Equatable {
    public let user: String
    public let bytesPerSecond: Int
    /// The tenant it counts against (docs/tenants.md); empty for the default tenant.
    public let tenant: String

    public init(user: String, bytesPerSecond: Int, tenant: String = "") {
        self.user = user
        self.bytesPerSecond = bytesPerSecond
        self.tenant = tenant
    }
}

/// The ledger's answer.
public enum AdmissionDecision: Sendable, Equatable {
    case granted(AdmissionLease)
    case refused(AdmissionRefusal)
    /// Asked elsewhere (Redis); the answer comes back with this ticket.
    case pending(AdmissionTicket)
}

/// Why an Allocate was refused, the error the client gets (RFC 8656 §7.2), and where it may go
/// instead.
public struct AdmissionRefusal: Sendable, Equatable {
    public enum Reason: Sendable, Equatable {
        /// An operator blocked the user (docs/admin.md): 403.
        case blocked
        /// `user-quota`, on this node or across the cluster: 486.
        case userQuota
        /// `total-quota` of this node: 508, and another node may serve.
        case totalQuota
        /// `bps-capacity` spent: 486 (as coturn answers), and another node may serve.
        case bandwidth
        /// `cluster-total-quota`: 508; a full cluster is not helped by a redirect.
        case clusterQuota
        /// Too many Allocates already wait for the cluster's answer: 508.
        case backlog
    }

    public var reason: Reason
    /// The other node the ledger names; when nil and the reason allows it, the core falls back
    /// to `alternate-server`.
    public var redirect: TransportAddress?

    public init(_ reason: Reason, redirect: TransportAddress? = nil) {
        self.reason = reason
        self.redirect = redirect
    }

    public var error: RelayError {
        switch reason {
        case .blocked: .forbidden
        case .userQuota, .bandwidth: .allocationQuotaReached
        case .totalQuota, .clusterQuota, .backlog: .insufficientCapacity
        }
    }

    /// Whether another node could serve the client: this node is full, not the user over quota.
    public var redirectable: Bool { reason == .totalQuota || reason == .bandwidth }
}
