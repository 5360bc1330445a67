import StunCodec

/// Allocations in a cluster (docs/cluster.md): quotas counted across nodes through Redis, and
/// redirects to another node when this one is full or draining.
extension RelayCore {
    /// What `admit` decided for an Allocate.
    enum AdmissionStep {
        /// Sent to Redis; the request comes back through `handleAdmittedRequest`.
        case wait
        case refuse(RelayError)
        /// Go on; `counted` when Redis already counts the allocation for this node.
        case proceed(counted: Bool)
    }

    /// Whether `user`'s Allocate may go on now. Alone, or with no quota counted across the
    /// cluster, or with Redis away, the node decides on its own counts. Otherwise the request
    /// waits for Redis, unless this node alone already holds the user's whole quota: that
    /// refusal is safe without asking.
    func admit(_ message: StunMessage, origin: ClientOrigin, user: String, now: Int64) -> AdmissionStep {
        if let answer = admission {
            switch answer {
            case .granted:
                admission = nil  // the quota tracker holds the count from here on
                return .proceed(counted: true)
            case .refused(let error): return .refuse(error)
            case .local: return .proceed(counted: false)
            }
        }
        let userQuota = context.quota.userQuota
        guard let cluster = context.cluster, cluster.needsAdmission(userQuota: userQuota) else {
            return .proceed(counted: false)
        }
        if userQuota > 0 && context.quota.count(user: user) >= userQuota { return .refuse(.allocationQuotaReached) }
        let fiveTuple = origin.fiveTuple
        // A retransmission while the first copy is with Redis is dropped: its answer will come.
        if isAwaitingAdmission(fiveTuple, now: now) { return .wait }
        if awaitingAdmission.count >= Self.admissionBacklog {
            awaitingAdmission = awaitingAdmission.filter { now - $0.value < Self.admissionPatience }
            guard awaitingAdmission.count < Self.admissionBacklog else { return .refuse(.insufficientCapacity) }
        }
        awaitingAdmission[fiveTuple] = now
        outbox.emit(
            .admitAllocation(
                AdmissionRequest(thread: context.threadIndex, bytes: Array(message.bytes), origin: origin, user: user)))
        return .wait
    }

    /// Whether `fiveTuple`'s Allocate is with the quota check now (a retransmission of it is
    /// neither charged to `allocate-rate-limit` nor sent again).
    func isAwaitingAdmission(_ fiveTuple: FiveTuple, now: Int64) -> Bool {
        guard let sent = awaitingAdmission[fiveTuple] else { return false }
        return now - sent < Self.admissionPatience
    }

    /// Seconds a sent admission holds back retransmissions of the same Allocate.
    static let admissionPatience: Int64 = 2
    /// Allocates waiting for Redis on one thread at most; beyond, 508.
    static let admissionBacklog = 4096

    /// An Allocate back from the cluster's quota check with Redis's answer for `user`: handled
    /// again as received, with the answer in place of the question.
    public func handleAdmittedRequest(
        _ bytes: [UInt8], from origin: ClientOrigin, user: String, admission answer: ClusterAdmission, now: Int64
    ) {
        awaitingAdmission[origin.fiveTuple] = nil
        if closedWhileAwaiting.remove(origin.fiveTuple) != nil {
            // The client's connection is gone: nothing to allocate, and Redis's count goes back.
            if answer == .granted { context.quota.returnCounted(user: user) }
            return
        }
        admission = answer
        defer { admission = nil }
        bytes.withUnsafeBytes { raw in handleClientPacket(raw, from: origin, now: now) }
        // A count Redis holds that no allocation took (a retransmission of an Allocate already
        // answered, a redirect, a request refused on the second reading) goes back.
        if admission == .granted { context.quota.returnCounted(user: user) }
    }

    /// Where to send a client this node cannot serve (full, draining): the least loaded other
    /// live node of the cluster in the client's address family, else the first `alternate-server`.
    func alternate(for origin: ClientOrigin) -> TransportAddress? {
        let family = origin.fiveTuple.server.ip.family
        if let node = context.cluster?.alternate(family: family, transport: origin.fiveTuple.transport) { return node }
        return settings.alternateServers.first
    }
}
