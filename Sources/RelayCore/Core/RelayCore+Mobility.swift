import StunCodec

extension RelayCore {
    /// MOBILITY-TICKET in an Allocate (RFC 8016 §3.1.2): false when absent; true when it asks for
    /// mobility and may have it; otherwise the error to answer: 405 when mobility is off or the
    /// client is not on UDP, 400 when the attribute is not empty.
    func mobilityRequested(by message: StunMessage, from origin: ClientOrigin) -> Result<Bool, RelayError> {
        guard let ticket = message.attribute(.mobilityTicket) else { return .success(false) }
        guard settings.mobility, origin.fiveTuple.transport == .udp else { return .failure(.mobilityForbidden) }
        guard ticket.value.isEmpty else { return .failure(.badRequest) }
        return .success(true)
    }

    /// Makes a new allocation mobile (RFC 8016 §3.1.2): the other threads learn that this one
    /// holds its session; `AllocationTable.insert` then lists it by session id here.
    func registerMobile(_ allocation: Allocation) {
        allocation.mobile = true
        tables.mobility.register(session: allocation.sessionID, thread: context.threadIndex)
    }

    /// The ticket for `allocation`'s current 5-tuple (serial = its moves so far).
    func ticket(for allocation: Allocation) -> MobilityTicket? {
        ticketsSealed &+= 1
        var nonce = [UInt8](repeating: 0, count: SealedBox.nonceLength)
        nonce[0] = UInt8(truncatingIfNeeded: context.threadIndex)
        for i in 0..<8 { nonce[4 + i] = UInt8(truncatingIfNeeded: ticketsSealed >> UInt64(56 - 8 * i)) }
        return tables.mobility.seal(session: allocation.sessionID, serial: allocation.moves, nonce: nonce)
            .map { MobilityTicket(bytes: $0) }
    }

    /// A Refresh with MOBILITY-TICKET from a 5-tuple that has no allocation (RFC 8016 §3.2.2): the
    /// allocation is found by its ticket, not by the 5-tuple. When another loop thread holds it,
    /// the request goes there (`forwardRequest`); see `moveAllocation`.
    func handleMobileRefresh(_ message: StunMessage, ticket: UnsafeRawBufferPointer, from origin: ClientOrigin, now: Int64) {
        let opened = settings.mobility ? tables.mobility.open(ticket) : nil
        guard let opened, let owner = tables.mobility.owner(of: opened.session) else {
            // Refused after authentication, so unauthenticated sources learn nothing: 405 with
            // mobility off; 400 for a ticket this process cannot read (forged, altered, sealed
            // before the last two keys); 437 for one whose allocation ended (RFC 8016 §3.2.2).
            guard let auth = authenticate(message, origin: origin, existing: nil, now: now) else { return }
            counters.mobility[MobilityOutcome.refused.rawValue] &+= 1
            let error: RelayError =
                !settings.mobility ? .mobilityForbidden : opened == nil ? .badRequest : .allocationMismatch
            return sendError(error, to: message, origin: origin, key: auth.key)
        }
        guard owner == context.threadIndex else {
            // Only UDP moves (a stream client's connection lives on this thread, so its answer
            // could not come from the owner's); each hand-over is charged to the source's
            // `unauth-rate-limit`, so a replayed ticket cannot flood the owner's mailbox.
            guard origin.fiveTuple.transport == .udp else {
                guard let auth = authenticate(message, origin: origin, existing: nil, now: now) else { return }
                return sendError(.mobilityForbidden, to: message, origin: origin, key: auth.key)
            }
            guard context.sourceLimits.challenges.allow(origin.fiveTuple.client.ip, now: now) else {
                return counters.drop(.rateLimited)
            }
            counters.mobility[MobilityOutcome.forwarded.rawValue] &+= 1
            return outbox.emit(
                .forwardRequest(ForwardedRequest(thread: LoopIndex(owner), bytes: Array(message.bytes), origin: origin)))
        }
        guard let allocation = table.mobile(session: opened.session) else {
            guard let auth = authenticate(message, origin: origin, existing: nil, now: now) else { return }
            return sendError(.allocationMismatch, to: message, origin: origin, key: auth.key)
        }
        moveAllocation(allocation, to: origin, message: message, serial: opened.serial, now: now)
    }

    /// A request another loop thread received for an allocation this one holds (`forwardRequest`).
    public func handleForwardedRequest(_ bytes: [UInt8], from origin: ClientOrigin, now: Int64) {
        assertOwned()
        bytes.withUnsafeBytes { raw in handleClientPacket(raw, from: origin, now: now) }
    }

    /// Moves `allocation` to the client's new 5-tuple (RFC 8016 §3.2.2): the Refresh must carry
    /// the allocation's current ticket (an older one is 400: it was used) and authenticate as
    /// its user (else 441). The relayed address, permissions and channels stay; the old 5-tuple
    /// is forgotten at once (docs/mobility.md). Then the Refresh is applied as usual
    /// (`applyRefresh`: LIFETIME 0 deletes; the answer carries a new ticket).
    func moveAllocation(
        _ allocation: Allocation, to origin: ClientOrigin, message: StunMessage, serial: UInt32, now: Int64
    ) {
        guard let auth = authenticate(message, origin: origin, existing: allocation, now: now) else { return }
        guard serial == allocation.moves else {
            counters.mobility[MobilityOutcome.refused.rawValue] &+= 1
            return sendError(.badRequest, to: message, origin: origin, key: auth.key)
        }
        guard origin.fiveTuple.transport == .udp else {
            return sendError(.mobilityForbidden, to: message, origin: origin, key: auth.key)
        }
        // The new 5-tuple must be free (it could hold another allocation of this thread).
        guard table[origin.fiveTuple] == nil else {
            return sendError(.allocationMismatch, to: message, origin: origin, key: auth.key)
        }
        // A family the allocation does not have is refused before anything moves (RFC 8656 §8.1).
        if let family = try? message.decode(RequestedAddressFamily.self), !allocation.serves(family.family) {
            return sendError(.peerAddressFamilyMismatch, to: message, origin: origin, key: auth.key)
        }
        let old = allocation.origin
        withdrawChannelRoutes(of: allocation)
        unpublish(allocation)
        // Answers leave from this thread's own listener on the server address.
        let listener = udpListeners.first { $0.0 == origin.fiveTuple.server }?.1 ?? origin.socket
        table.move(allocation, to: ClientOrigin(fiveTuple: origin.fiveTuple, socket: listener))
        allocation.moves &+= 1
        outbox.emit(.steerClient(session: allocation.session, from: old.fiveTuple, to: origin.fiveTuple))
        outbox.emit(.session(.moved(SessionMove(session: allocation.session, from: old.fiveTuple, to: origin.fiveTuple))))
        counters.mobility[MobilityOutcome.moved.rawValue] &+= 1
        applyRefresh(message, to: allocation, origin: allocation.origin, key: auth.key, now: now)
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
        if allocation.moves > 0 {
            outbox.emit(.steerClient(session: allocation.session, from: allocation.origin.fiveTuple, to: nil))
        }
    }
}
