import StunCodec

// Mobility (RFC 8016): the `Mobility` machine decides; this glue authenticates, answers, counts,
// emits the commands and moves the allocation in the table (docs/mobility.md).
extension RelayCore {
    /// MOBILITY-TICKET in an Allocate (RFC 8016 §3.1.2): false when absent; true when it asks for
    /// mobility and may have it; otherwise the error to answer (`Mobility.requested`).
    func mobilityRequested(by message: StunMessage, from origin: ClientOrigin) -> Result<Bool, RelayError> {
        Mobility.requested(
            ticketLength: message.attribute(.mobilityTicket)?.value.count, enabled: settings.mobility,
            transport: origin.fiveTuple.transport)
    }

    /// Makes a new allocation mobile (RFC 8016 §3.1.2): the other threads learn that this one
    /// holds its session; `AllocationTable.insert` then lists it by session id here.
    func registerMobile(_ allocation: Allocation) {
        allocation.mobile = true
        tables.mobility.register(session: allocation.sessionID, thread: context.threadIndex)
    }

    /// The ticket for `allocation`'s current 5-tuple (serial = its moves so far).
    func ticket(for allocation: Allocation) -> MobilityTicket? {
        mobility.ticket(
            session: allocation.sessionID, serial: allocation.moves, thread: context.threadIndex, keys: tables.mobility)
    }

    /// A Refresh with MOBILITY-TICKET from a 5-tuple that has no allocation (RFC 8016 §3.2.2): the
    /// allocation is found by its ticket, not by the 5-tuple (`Mobility.route`). When another
    /// loop thread holds it, the request goes there (`forwardRequest`); see `moveAllocation`.
    func handleMobileRefresh(
        _ message: StunMessage, ticket: UnsafeRawBufferPointer, from origin: ClientOrigin, now: Int64
    ) {
        let opened = settings.mobility ? tables.mobility.open(ticket) : nil
        let owner = opened.flatMap { tables.mobility.owner(of: $0.session) }
        let route = Mobility.route(
            opened: opened, owner: owner, enabled: settings.mobility, thread: context.threadIndex,
            transport: origin.fiveTuple.transport)
        switch route {
        case .refuse(let refusal):
            // Refused after authentication, so unauthenticated sources learn nothing.
            guard let auth = authenticate(message, origin: origin, existing: nil, now: now) else { return }
            sendRefusal(refusal, to: message, origin: origin, key: auth.key)
        case .forward(let owner):
            // Each hand-over is charged to the source's `unauth-rate-limit`, so a replayed
            // ticket cannot flood the owner's mailbox.
            guard context.sourceLimits.challenges.allow(origin.fiveTuple.client.ip, now: now) else {
                return counters.drop(.rateLimited)
            }
            counters.mobility[MobilityOutcome.forwarded.rawValue] &+= 1
            outbox.emit(.forwardRequest(ForwardedRequest(thread: owner, bytes: Array(message.bytes), origin: origin)))
        case .local(let session, let serial):
            guard let allocation = table.mobile(session: session) else {
                guard let auth = authenticate(message, origin: origin, existing: nil, now: now) else { return }
                return sendError(.allocationMismatch, to: message, origin: origin, key: auth.key)
            }
            moveAllocation(allocation, to: origin, message: message, serial: serial, now: now)
        }
    }

    /// A request another loop thread received for an allocation this one holds (`forwardRequest`).
    public func handleForwardedRequest(_ bytes: [UInt8], from origin: ClientOrigin, now: Int64) {
        assertOwned()
        bytes.withUnsafeBytes { raw in handleClientPacket(raw, from: origin, now: now) }
    }

    /// Moves `allocation` to the client's new 5-tuple (RFC 8016 §3.2.2) when `Mobility.refusal`
    /// allows it, after the Refresh authenticated as its user (else 441). The relayed address,
    /// permissions and channels stay; the old 5-tuple is forgotten at once (docs/mobility.md).
    /// Then the Refresh is applied as usual (`applyRefresh`: LIFETIME 0 deletes; the answer
    /// carries a new ticket).
    func moveAllocation(
        _ allocation: Allocation, to origin: ClientOrigin, message: StunMessage, serial: UInt32, now: Int64
    ) {
        guard let auth = authenticate(message, origin: origin, existing: allocation, now: now) else { return }
        let family = try? message.decode(RequestedAddressFamily.self)
        let refusal = Mobility.refusal(
            serial: serial, moves: allocation.moves, transport: origin.fiveTuple.transport,
            destinationFree: table[origin.fiveTuple] == nil,
            servesFamily: family.map { allocation.serves($0.family) } ?? true)
        if let refusal { return sendRefusal(refusal, to: message, origin: origin, key: auth.key) }
        let old = allocation.origin
        withdrawChannelRoutes(of: allocation)
        unpublish(allocation)
        table.move(allocation, to: Mobility.movedOrigin(origin, listeners: udpListeners))
        allocation.moves &+= 1
        outbox.emit(.steerClient(session: allocation.session, from: old.fiveTuple, to: origin.fiveTuple))
        outbox.emit(
            .session(.moved(SessionMove(session: allocation.session, from: old.fiveTuple, to: origin.fiveTuple))))
        counters.mobility[MobilityOutcome.moved.rawValue] &+= 1
        applyRefresh(message, to: allocation, origin: allocation.origin, key: auth.key, now: now)
    }

    /// Answers a refused mobility request, counting it when it counts.
    private func sendRefusal(
        _ refusal: MobilityRefusal, to message: StunMessage, origin: ClientOrigin, key: IntegrityKey
    ) {
        if let outcome = refusal.counted { counters.mobility[outcome.rawValue] &+= 1 }
        sendError(refusal.error, to: message, origin: origin, key: key)
    }

    /// Takes `allocation` out of the shared directory (its client is about to change), adding
    /// what other threads delivered to it to its traffic; `publish` lists it again.
    func unpublish(_ allocation: Allocation) {
        unlist(allocation.relayedAddress, of: allocation)
        if let additional = allocation.additional { unlist(additional.relayedAddress, of: allocation) }
    }

    /// A mobile allocation ended (RFC 8016 §3.2.2; `AllocationTable.remove` has forgotten its
    /// session): other threads no longer send its tickets here, and the I/O layer stops receiving
    /// its 5-tuple on a socket of its own.
    func forgetMobile(_ allocation: Allocation) {
        guard allocation.mobile else { return }
        tables.mobility.unregister(session: allocation.sessionID)
        if Mobility.hasSteeredSocket(moves: allocation.moves) {
            outbox.emit(.steerClient(session: allocation.session, from: allocation.origin.fiveTuple, to: nil))
        }
    }
}
