import StunCodec

extension RelayCore {
    /// Refresh request (RFC 8656 §8.2): LIFETIME 0 deletes the allocation, otherwise extends it
    /// by the "desired lifetime" computed as for Allocate: min(requested, max-allocate-lifetime)
    /// but never below the default 600 s, which is also used when LIFETIME is absent.
    func handleRefresh(_ message: StunMessage, from origin: ClientOrigin, now: Int64) {
        let existing = table[origin.fiveTuple]
        if existing == nil, let ticket = message.attribute(.mobilityTicket) {
            return handleMobileRefresh(message, ticket: ticket.value, from: origin, now: now)
        }
        guard let auth = authenticate(message, origin: origin, existing: existing, now: now) else { return }
        guard let allocation = existing else {
            return sendError(.allocationMismatch, to: message, origin: origin, key: auth.key)
        }
        applyRefresh(message, to: allocation, origin: origin, key: auth.key, now: now)
    }

    /// The Refresh's effect on `allocation` once it is authenticated (and, for a move, moved):
    /// LIFETIME 0 deletes it, otherwise its lifetime is extended by the "desired lifetime"; in a
    /// dual allocation REQUESTED-ADDRESS-FAMILY picks the relayed address to refresh or delete,
    /// and without it the Refresh applies to both (RFC 8656 §8.1); a family the allocation does
    /// not have is 443. A mobile allocation's answer carries a fresh ticket (RFC 8016 §3.2.2), so
    /// a client that refreshes keeps a ticket sealed under a current key.
    func applyRefresh(_ message: StunMessage, to allocation: Allocation, origin: ClientOrigin, key: IntegrityKey, now: Int64) {
        let requested: Lifetime?
        let family: RequestedAddressFamily?
        do {
            requested = try message.decode(Lifetime.self)
            family = try message.decode(RequestedAddressFamily.self)
        } catch {
            return sendError(.badRequest, to: message, origin: origin, key: key)
        }
        if let family, !allocation.serves(family.family) {
            return sendError(.peerAddressFamilyMismatch, to: message, origin: origin, key: key)
        }
        let lifetime = requested?.seconds == 0 ? 0 : allocateLifetime(requested: requested)
        let ticket = allocation.mobile && lifetime > 0 ? self.ticket(for: allocation) : nil
        respond(to: message, origin: origin, messageClass: .successResponse, key: key) { w throws(StunEncodeError) in
            try w.append(Lifetime(seconds: UInt32(lifetime)))
            if let ticket { try w.append(ticket) }
            try appendSoftware(&w)
        }
        let only = allocation.additional == nil ? nil : family?.family
        if lifetime == 0 {
            if let only { return endRelay(of: only, in: allocation, now: now) }
            delete(allocation, reason: .refreshedToZero, now: now)
        } else {
            if only == nil || only == allocation.relayedAddress.ip.family { allocation.main.expiry = now + lifetime }
            if only == nil || only == allocation.additional?.relayedAddress.ip.family {
                allocation.additional?.expiry = now + lifetime
            }
            publish(allocation)
            announceChannels(of: allocation, peerIPs: nil, now: now)
            outbox.emit(
                .session(
                    .refreshed(
                        SessionRefresh(
                            session: allocation.session, fiveTuple: allocation.origin.fiveTuple,
                            lifetimeSeconds: lifetime))))
        }
    }
}
