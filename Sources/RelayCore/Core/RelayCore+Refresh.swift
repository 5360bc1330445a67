import StunCodec

extension RelayCore {
    /// Refresh request (RFC 8656 §8.2): LIFETIME 0 deletes the allocation, otherwise extends it
    /// by the "desired lifetime" computed as for Allocate: min(requested, max-allocate-lifetime)
    /// but never below the default 600 s, which is also used when LIFETIME is absent.
    func handleRefresh(_ message: StunMessage, from origin: ClientOrigin, now: Int64) {
        let existing = byFiveTuple[origin.fiveTuple]
        if existing == nil, let ticket = message.attribute(.mobilityTicket) {
            return handleMobileRefresh(message, ticket: ticket.value, from: origin, now: now)
        }
        guard let auth = authenticate(message, origin: origin, existing: existing, now: now) else { return }
        guard let allocation = existing else {
            return sendError(.allocationMismatch, to: message, origin: origin, key: auth.key)
        }
        let requested: Lifetime?
        let family: RequestedAddressFamily?
        do {
            requested = try message.decode(Lifetime.self)
            family = try message.decode(RequestedAddressFamily.self)
        } catch {
            return sendError(.badRequest, to: message, origin: origin, key: auth.key)
        }
        if let family, !allocation.serves(family.family) {
            return sendError(.peerAddressFamilyMismatch, to: message, origin: origin, key: auth.key)
        }
        let lifetime = requested?.seconds == 0 ? 0 : allocateLifetime(requested: requested)
        // A ticket on the allocation's own 5-tuple: most likely the retransmission of the
        // Refresh that moved it here; it gets the current ticket again (RFC 8016 §3.2.2).
        let ticket =
            allocation.mobile && lifetime > 0 && message.contains(.mobilityTicket) ? self.ticket(for: allocation) : nil
        respond(to: message, origin: origin, messageClass: .successResponse, key: auth.key) { w throws(StunEncodeError) in
            try w.append(Lifetime(seconds: UInt32(lifetime)))
            if let ticket { try w.append(ticket) }
            try appendSoftware(&w)
        }
        // In a dual allocation REQUESTED-ADDRESS-FAMILY picks the relayed address to refresh or
        // delete; without it, the Refresh applies to both (RFC 8656 §8.1).
        let only = allocation.additional == nil ? nil : family?.family
        if lifetime == 0 {
            if let only { return endRelay(of: only, in: allocation, now: now) }
            delete(allocation, reason: .refreshedToZero, now: now)
        } else {
            if only == nil || only == allocation.relayedAddress.ip.family { allocation.expiry = now + lifetime }
            if only == nil || only == allocation.additional?.relayedAddress.ip.family {
                allocation.additional?.expiry = now + lifetime
            }
            publish(allocation)
            announceChannels(of: allocation, peerIPs: nil, now: now)
        }
    }
}
