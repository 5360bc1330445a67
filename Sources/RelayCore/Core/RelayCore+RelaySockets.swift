import StunCodec

/// Opening relay sockets as commands (docs/architecture.md, "Relay sockets"): the core picks
/// each relayed address's port from the node's pool and emits `openRelaySocket`; the I/O layer's
/// answer comes back through `relaySocketOpened`. A port another process holds sends the search
/// on to the next port; running out of descriptors ends it at once (RFC 8656 §7.2: 508).
extension RelayCore {
    /// Starts opening the relayed addresses `request` was granted `lease` for: one, or an IPv4
    /// and an IPv6 one for ADDITIONAL-ADDRESS-FAMILY (RFC 8656 §7.2 step 9). The allocation is
    /// made when every socket has answered (`finishOpening`).
    func openRelays(for request: AllocateRequest, lease: AdmissionLease, now: Int64) {
        let families: [IPAddress.Family] = request.dual ? [.ipv4, .ipv6] : [request.family]
        var slots: [RelaySlot] = []
        slots.reserveCapacity(families.count)
        for family in families {
            var reserved: TransportAddress? = nil
            var usable = true
            if let token = request.token {
                // Whichever thread reserved the port, the reservation's hold passes to the allocation.
                usable = false
                if let entry = tables.reservations.take(token.value) {
                    reservations[token.value] = nil
                    journalReservationEnded(token.value)
                    if entry.expiry > now {
                        reserved = TransportAddress(ip: entry.address, port: entry.port)
                        usable = true
                    } else {
                        tables.ports.release(entry.port, on: entry.address)
                    }
                }
            }
            let candidates =
                usable && reserved == nil
                ? context.relayAddresses.lazy.filter { $0.bound.family == family }.map(\.bound) : []
            slots.append(
                RelaySlot(
                    family: family, evenPort: request.evenPort, tcp: request.tcp, reserved: reserved,
                    candidates: Array(candidates), start: candidates.isEmpty ? 0 : relayCursor % candidates.count))
        }
        let serial = relayOpenings.nextSerial()
        var opening = RelayOpening(request: request, lease: lease, slots: slots)
        for index in opening.slots.indices { search(&opening.slots[index], id: RelayOpenings.id(serial: serial, slot: index)) }
        if opening.settled { return finishOpening(opening, now: now) }
        relayOpenings.hold(opening, serial: serial)
    }

    /// The I/O layer opened (or could not open) the socket `open` asked for. Opened, the port is
    /// the allocation's; in use, the next free port is tried; out of descriptors, that relayed
    /// address cannot be had (logged once per episode). When every socket of the Allocate has
    /// answered, the allocation is made and answered.
    public func relaySocketOpened(_ open: RelaySocketOpen, _ result: RelaySocketOpening, now: Int64) {
        assertOwned()
        let serial = RelayOpenings.serial(of: open.id)
        let index = RelayOpenings.slot(of: open.id)
        guard var opening = relayOpenings.take(serial), index < opening.slots.count,
            case .opening(let address, let pair) = opening.slots[index].state, address == open.address
        else {
            // Nothing asked for it (a driver's mistake): what opened is closed, the port stays
            // with whoever holds it.
            if case .opened(let socket) = result { outbox.emit(.closeRelaySocket(socket)) }
            return
        }
        switch result {
        case .opened(let socket):
            tables.ports.mark(address.port, on: address.ip, as: open.tcp ? .tcpAllocation : .udpAllocation)
            let slot = opening.slots[index]
            if slot.reserved == nil { relayCursor = (slot.start + slot.attempt + 1) % slot.candidates.count }
            opening.slots[index].state = .opened(address, socket)
        case .portInUse:
            // Another socket holds it: out of the search for a while, its pair partner back.
            tables.ports.markForeign(address.port, on: address.ip)
            if pair { tables.ports.release(address.port + 1, on: address.ip) }
            // No next port for a client that is gone.
            if opening.cancelled { opening.slots[index].state = .failed } else { search(&opening.slots[index], id: open.id) }
        case .failed:
            release(address, pair: pair)
            if opening.cancelled { opening.slots[index].state = .failed } else { search(&opening.slots[index], id: open.id) }
        case .exhausted:
            release(address, pair: pair)
            opening.slots[index].state = .failed
            if tables.ports.noteExhausted() {
                logger.error("relay socket: out of file descriptors or memory; Allocate answered 508 until a socket opens again")
            }
        }
        if opening.settled { return finishOpening(opening, now: now) }
        relayOpenings.hold(opening, serial: serial)
    }

    /// Granted Allocates of this loop waiting for their relay sockets.
    public var relayOpeningCount: Int { relayOpenings.count }

    /// Sends `slot` on to its next port: the reserved one (once), else the next free port of the
    /// pool on the current relay address, then on the next ones (RFC 8656 §18.7: an even port for
    /// EVEN-PORT, with its successor held for the R bit). Each address's range is searched once
    /// at most; with nothing left the slot fails.
    private func search(_ slot: inout RelaySlot, id: UInt64) {
        if let reserved = slot.reserved {
            if slot.tries > 0 { return slot.state = .failed }
            slot.tries = 1
            slot.state = .opening(reserved, pair: false)
            return outbox.emit(.openRelaySocket(RelaySocketOpen(id: id, address: reserved, tcp: slot.tcp)))
        }
        let rangeCount = max(1, Int(settings.maxPort) - Int(settings.minPort) + 1)
        let pair = slot.evenPort?.reservePair == true
        while slot.attempt < slot.candidates.count {
            let ip = slot.candidates[(slot.start + slot.attempt) % slot.candidates.count]
            if slot.tries < rangeCount, let port = tables.ports.take(on: ip, even: slot.evenPort != nil, pair: pair) {
                slot.tries += 1
                let address = TransportAddress(ip: ip, port: port)
                slot.state = .opening(address, pair: pair)
                return outbox.emit(.openRelaySocket(RelaySocketOpen(id: id, address: address, tcp: slot.tcp)))
            }
            slot.attempt += 1
            slot.tries = 0
        }
        slot.state = .failed
    }

    private func release(_ address: TransportAddress, pair: Bool) {
        tables.ports.release(address.port, on: address.ip)
        if pair { tables.ports.release(address.port + 1, on: address.ip) }
    }

    /// Every socket of `opening` answered: the allocation is made with what opened, or, when
    /// nothing could be had (or the client is gone), what opened closes and the lease goes back.
    private func finishOpening(_ opening: RelayOpening, now: Int64) {
        let request = opening.request
        if opening.cancelled || table[request.origin.fiveTuple] != nil {
            for slot in opening.slots {
                guard let (address, socket) = slot.opened else { continue }
                outbox.emit(.closeRelaySocket(socket))
                tables.ports.release(address.port, on: address.ip)
            }
            return tables.ledger.release(opening.lease)
        }
        let first = opening.slots[0].opened
        guard request.dual else {
            return createAllocation(request, lease: opening.lease, relays: first.map { ($0, nil, nil) }, now: now)
        }
        // A dual allocation with one family missing says why in ADDRESS-ERROR-CODE (RFC 8656
        // §7.2 step 9): 440 when relayd has no relay address of that family, else 508.
        let second = opening.slots[1].opened
        func missing(_ family: IPAddress.Family) -> AddressErrorCode {
            let error: RelayError =
                context.relayAddresses.contains { $0.bound.family == family }
                ? .insufficientCapacity : .addressFamilyNotSupported
            return AddressErrorCode(family: family, code: error.code, reason: error.reason)
        }
        let relays: ((TransportAddress, RelaySocket), (TransportAddress, RelaySocket)?, AddressErrorCode?)?
        switch (first, second) {
        case (let v4?, let v6): relays = (v4, v6, v6 == nil ? missing(.ipv6) : nil)
        case (nil, let v6?): relays = (v6, nil, missing(.ipv4))
        case (nil, nil): relays = nil
        }
        createAllocation(request, lease: opening.lease, relays: relays, now: now)
    }
}
