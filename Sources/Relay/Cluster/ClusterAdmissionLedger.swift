import CLibevent
import RelayCore
import StunCodec

/// Admission in a cluster (docs/cluster.md): the node's `LocalAdmissionLedger` with the quotas
/// counted across nodes in Redis on top. The one place that asks Redis about an Allocate
/// (`ClusterAdmissionLedger+Redis.swift`, on the main thread); loops never wait on it.
///
/// An Allocate needs Redis only when a quota counts across nodes (`user-quota`,
/// `cluster-total-quota`) and Redis answers. Then it is queued for the main loop and answered
/// `.pending`; the decision comes back to the loop that asked through `deliver`. Otherwise, and
/// when the queue is full or no agent listens, the node decides at once on its own counts.
final class ClusterAdmissionLedger: AdmissionLedger {
    /// Another live, non-draining node a client can be sent to (RFC 8489 §10, ALTERNATE-SERVER).
    struct Alternate: Sendable, Equatable {
        var name: String
        /// The node's STUN/TURN addresses (UDP and TCP share the port), at most one per family.
        var addresses: [TransportAddress]
        /// Its TLS port, when it serves TLS.
        var tlsPort: UInt16?
    }

    private struct State {
        var redisUp = false
        var clusterTotalQuota: Int
        /// Least loaded first.
        var alternates: [Alternate] = []
        /// Allocates waiting for the main loop to ask Redis.
        var queue: [AdmissionRequest] = []
        /// The main loop's wake-up event (an `event*` as an integer), 0 while no agent listens.
        var wake: UInt = 0
        var counters = ClusterCounters()
    }

    let local: LocalAdmissionLedger
    private let state: Locked<State>
    /// Hands a pending Allocate's decision to the loop that holds it (its mailbox).
    private let deliver: @Sendable (AdmissionTicket, AdmissionDecision) -> Void
    /// Allocates queued for Redis at most; beyond, the node decides alone.
    static let queueLimit = 4096

    init(
        local: LocalAdmissionLedger, clusterTotalQuota: Int,
        deliver: @escaping @Sendable (AdmissionTicket, AdmissionDecision) -> Void
    ) {
        self.local = local
        self.deliver = deliver
        state = Locked(State(clusterTotalQuota: clusterTotalQuota))
        local.startMirroring()
    }

    // MARK: AdmissionLedger, on the loop threads

    func admit(_ request: AdmissionRequest) -> AdmissionDecision {
        let userQuota = local.userQuota(ofTenant: request.tenant)
        // Counted across nodes but Redis is away: decided on this node's counts, and counted so.
        let needsRedis = state.withLock { s -> Bool in
            guard userQuota > 0 || s.clusterTotalQuota > 0 else { return false }
            if !s.redisUp { s.counters.local += 1 }
            return s.redisUp
        }
        // The local ledger checks blocks itself; before asking Redis, this ledger does.
        guard needsRedis else { return withRedirect(local.admit(request), request) }
        if local.blocklist.isBlocked(request.user, now: request.wallTime) { return .refused(.init(.blocked)) }
        // This node alone already holds the user's whole quota: that refusal is safe without asking.
        if userQuota > 0 && local.count(user: request.user) >= userQuota { return .refused(.init(.userQuota)) }
        let queued = state.withLock { s -> Bool in
            guard s.wake != 0, s.queue.count < Self.queueLimit else { return false }
            s.queue.append(request)
            event_active(OpaquePointer(bitPattern: s.wake), 0, 0)
            return true
        }
        // A full queue, or no agent yet or any more: the node decides alone.
        guard queued else {
            state.withLock { $0.counters.local += 1 }
            return withRedirect(local.admit(request), request)
        }
        return .pending(request.ticket)
    }

    func release(_ lease: AdmissionLease) { local.release(lease) }

    /// Counted here and, through the deltas, in Redis at the next flush.
    func readmit(_ lease: AdmissionLease) -> AdmissionLease { local.readmit(lease) }

    func alternate(family: IPAddress.Family, transport: TransportProtocol) -> TransportAddress? {
        state.withLock { s in
            for node in s.alternates {
                guard let address = node.addresses.first(where: { $0.ip.family == family }) else { continue }
                if transport == .tls {
                    guard let port = node.tlsPort else { continue }
                    return TransportAddress(ip: address.ip, port: port)
                }
                return address
            }
            return nil
        }
    }

    private func withRedirect(_ decision: AdmissionDecision, _ request: AdmissionRequest) -> AdmissionDecision {
        guard case .refused(var refusal) = decision, refusal.redirectable else { return decision }
        refusal.redirect = alternate(family: request.family, transport: request.transport)
        return .refused(refusal)
    }

    // MARK: The cluster's view, kept current by the agent on the main thread

    var redisUp: Bool { state.withLock { $0.redisUp } }
    var clusterTotalQuota: Int { state.withLock { $0.clusterTotalQuota } }
    var counters: ClusterCounters { state.withLock { $0.counters } }

    func update(redisUp: Bool) { state.withLock { $0.redisUp = redisUp } }
    func update(alternates: [Alternate]) { state.withLock { $0.alternates = alternates } }
    func update(clusterTotalQuota: Int) { state.withLock { $0.clusterTotalQuota = clusterTotalQuota } }
    func noteRedisError() { state.withLock { $0.counters.errors += 1 } }

    /// On the main thread, once its wake-up event exists.
    func attach(_ event: OpaquePointer) {
        state.withLock { $0.wake = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(event))) }
    }

    /// On the main thread, before the event is freed: later Allocates are decided locally, and
    /// those still queued are decided now.
    func detach() {
        let queued = state.withLock { s in
            s.wake = 0
            s.redisUp = false
            defer { s.queue.removeAll() }
            return s.queue
        }
        for request in queued { settle(request, redisAnswer: nil) }
    }

    /// On the main thread: the Allocates queued since the last call.
    func takeQueued() -> [AdmissionRequest] {
        state.withLock { s in
            defer { s.queue.removeAll() }
            return s.queue
        }
    }

    /// Decides a queued Allocate on Redis's answer to the admit script (`ClusterKeys.admit`): 0
    /// granted (Redis counts it for this node already), 1 over `user-quota`, 2 over
    /// `cluster-total-quota`; nil (no answer, an error) decides on the node's own counts. The
    /// decision goes to the loop that holds the Allocate.
    func settle(_ request: AdmissionRequest, redisAnswer: Int?) {
        let decision: AdmissionDecision
        switch redisAnswer {
        case 0: decision = withRedirect(local.admitCounted(request), request)
        case 1: decision = .refused(.init(.userQuota))
        case 2: decision = .refused(.init(.clusterQuota))
        default: decision = withRedirect(local.admit(request), request)
        }
        state.withLock { s in
            switch redisAnswer {
            case 0: s.counters.granted += 1
            case 1, 2: s.counters.refused += 1
            default: s.counters.local += 1
            }
        }
        deliver(request.ticket, decision)
    }
}

/// The cluster's admission counters, for `/metrics`.
struct ClusterCounters: Sendable {
    var granted: UInt64 = 0
    var refused: UInt64 = 0
    /// Decided on the node's own counts: Redis away, late, or the queue full.
    var local: UInt64 = 0
    /// Error replies from Redis (a script or command it refused).
    var errors: UInt64 = 0
}
