import StunCodec

/// Admission of Allocates (docs/architecture.md, "Admission"): the core asks the node's
/// `AdmissionLedger` and acts on its answer. A pending answer (a cluster asking Redis) keeps the
/// request in `pendingAllocates` until `resumeAllocate` brings the decision back.
extension RelayCore {
    /// Asks the ledger whether `request` may allocate, and allocates, refuses, or holds it.
    func admit(_ request: AllocateRequest, now: Int64) {
        let fiveTuple = request.origin.fiveTuple
        guard pendingAllocates.hasRoom(now: now) else {
            return refuse(AdmissionRefusal(.backlog), request)
        }
        let question = AdmissionRequest(
            user: request.userID, bytesPerSecond: maxBPS(ofTenant: request.auth.tenant),
            family: fiveTuple.server.ip.family, transport: fiveTuple.transport, wallTime: wallTime(now),
            ticket: pendingAllocates.nextTicket(loop: LoopIndex(context.threadIndex)),
            tenant: context.tenants.name(of: request.auth.tenant))
        decide(request, tables.ledger.admit(question), now: now)
    }

    /// The ledger's answer to an Allocate it held as pending, named by `ticket` (the cluster
    /// ledger posts it to this loop). When the Allocate is no longer held (its connection closed,
    /// or a later copy asked again) a granted lease goes back at once.
    public func resumeAllocate(_ ticket: AdmissionTicket, decision: AdmissionDecision, now: Int64) {
        assertOwned()
        guard let request = pendingAllocates.take(ticket), table[request.origin.fiveTuple] == nil else {
            if case .granted(let lease) = decision { tables.ledger.release(lease) }
            return
        }
        if case .pending = decision {
            // A ledger answers a pending question with a decision; another wait is refused.
            return refuse(AdmissionRefusal(.backlog), request)
        }
        decide(request, decision, now: now)
    }

    /// The 5-tuple of the pending Allocate `ticket` names; nil when none is held under it.
    public func pendingAllocate(_ ticket: AdmissionTicket) -> FiveTuple? { pendingAllocates.fiveTuple(of: ticket) }

    /// Allocates held for the ledger's answer on this loop.
    public var pendingAllocateCount: Int { pendingAllocates.count }

    private func decide(_ request: AllocateRequest, _ decision: AdmissionDecision, now: Int64) {
        switch decision {
        case .granted(let lease): allocate(request, lease: lease, now: now)
        case .refused(let refusal): refuse(refusal, request)
        case .pending(let ticket): pendingAllocates.hold(request, ticket: ticket, now: now)
        }
    }

    private func refuse(_ refusal: AdmissionRefusal, _ request: AllocateRequest) {
        if refusal.reason == .blocked { counters.allocatesOfBlockedUsers += 1 }
        let key = request.auth.key
        guard refusal.redirectable else {
            return sendError(refusal.error, to: request.reply, origin: request.origin, key: key)
        }
        refuse(refusal.error, to: request.reply, origin: request.origin, key: key, redirect: refusal.redirect)
    }

    /// A full or draining node: 300 to `redirect`, else to the least loaded other node of the
    /// cluster or to `alternate-server`, when there is one (RFC 8489 §10); else `error` itself.
    func refuse(
        _ error: RelayError, to reply: ReplyTarget, origin: ClientOrigin, key: IntegrityKey,
        redirect: TransportAddress? = nil
    ) {
        guard let alternate = redirect ?? alternate(for: origin) else {
            return sendError(error, to: reply, origin: origin, key: key)
        }
        sendError(.tryAlternate, to: reply, origin: origin, key: key) { w throws(StunEncodeError) in
            try w.append(AlternateServer(address: alternate))
        }
    }

    /// Where to send a client this node cannot serve (full, draining): the least loaded other
    /// live node of the cluster in the client's address family, else the first `alternate-server`.
    func alternate(for origin: ClientOrigin) -> TransportAddress? {
        let fiveTuple = origin.fiveTuple
        if let node = tables.ledger.alternate(family: fiveTuple.server.ip.family, transport: fiveTuple.transport) {
            return node
        }
        return settings.alternateServers.first
    }
}
