import StunCodec

extension RelayCore {
    /// Allocate request (RFC 8656 §7.2, RFC 6156 §4, RFC 6062 §5.1).
    func handleAllocate(_ message: StunMessage, from origin: ClientOrigin, now: Int64) {
        let fiveTuple = origin.fiveTuple
        if let existing = table[fiveTuple] {
            // A retransmission gets the original success response again while it is kept
            // (`Allocation.allocateResponseKept`); anything else is 437.
            if existing.allocateTransactionID == message.transactionID
                && resendAllocateResponse(of: existing, to: message, origin: origin)
            {
                return
            }
            guard let auth = authenticate(message, origin: origin, existing: existing, now: now) else { return }
            sendError(.allocationMismatch, to: message, origin: origin, key: auth.key)
            return
        }
        guard let auth = authenticate(message, origin: origin, existing: nil, now: now) else { return }
        // A retransmission while the first copy waits for the ledger's answer: that answer will come.
        if pendingAllocates.isWaiting(fiveTuple, now: now) || relayOpenings.contains(fiveTuple) { return }
        let reply = { (error: RelayError) in self.sendError(error, to: message, origin: origin, key: auth.key) }

        if context.draining { return refuse(.insufficientCapacity, to: ReplyTarget(message), origin: origin, key: auth.key) }
        guard let transport = try? message.decode(RequestedTransport.self) else { return reply(.badRequest) }
        // UDP, or TCP (RFC 6062 §5.1) asked for over a TCP or TLS connection (else 400).
        let tcp = transport.protocolNumber == RequestedTransport.tcp.protocolNumber && settings.tcpRelay
        guard transport.protocolNumber == RequestedTransport.udp.protocolNumber || tcp else {
            return reply(.unsupportedTransportProtocol)
        }
        if tcp && !fiveTuple.transport.isStream { return reply(.badRequest) }
        let evenPort: EvenPort?
        let token: ReservationToken?
        let requestedFamily: RequestedAddressFamily?
        let additionalFamily: AdditionalAddressFamily?
        do {
            evenPort = try message.decode(EvenPort.self)
            token = try message.decode(ReservationToken.self)
            requestedFamily = try message.decode(RequestedAddressFamily.self)
            let standard = try message.decode(AdditionalAddressFamily.self)
            let draft = try draftAdditionalFamily(in: message)
            additionalFamily = standard ?? draft
        } catch .badAttributeValue(.requestedAddressFamily) {
            return reply(.addressFamilyNotSupported)
        } catch {
            return reply(.badRequest)
        }
        // RFC 8656 §7.2 steps 5, 6, 8 and 9: RESERVATION-TOKEN excludes EVEN-PORT and both family
        // attributes; REQUESTED- and ADDITIONAL-ADDRESS-FAMILY exclude each other; ADDITIONAL-
        // ADDRESS-FAMILY excludes EVEN-PORT with R set, and may only ask for IPv6.
        let dual = additionalFamily != nil
        if token != nil && (evenPort != nil || requestedFamily != nil || dual) { return reply(.badRequest) }
        if requestedFamily != nil && dual { return reply(.badRequest) }
        if dual && (evenPort?.reservePair == true || additionalFamily?.family != .ipv6) { return reply(.badRequest) }
        let mobile: Bool
        switch mobilityRequested(by: message, from: origin) {
        case .success(let asked): mobile = asked
        case .failure(let error): return reply(error)
        }
        // A TCP allocation has one relayed address, with no port pairing and no DONT-FRAGMENT
        // (RFC 6062 §5.1).
        if tcp && (evenPort != nil || token != nil || dual || message.contains(.dontFragment)) {
            return reply(.badRequest)
        }

        // A source over `allocate-rate-limit` (when set) gets 486, as for a quota: authenticated, so
        // not a reflector.
        guard context.sourceLimits.allocations.allow(fiveTuple.client.ip, now: now) else {
            counters.drop(.rateLimited)
            return reply(.allocationQuotaReached)
        }
        let request = AllocateRequest(
            origin: origin, reply: ReplyTarget(message), auth: auth,
            userID: quotaUser(of: auth.username, tenant: auth.tenant), tcp: tcp,
            family: requestedFamily?.family ?? .ipv4, dual: dual,
            draftAddressError: message.contains(.additionalAddressFamilyDraft)
                && !message.contains(.additionalAddressFamily),
            evenPort: evenPort, token: token, mobile: mobile, dontFragment: message.contains(.dontFragment),
            requestedLifetime: try? message.decode(Lifetime.self))
        admit(request, now: now)
    }

    /// Creates the allocation `request` was granted `lease` for (RFC 8656 §7.2 steps 10-12) once
    /// its relay sockets are open (`openRelays`).
    func allocate(_ request: AllocateRequest, lease: AdmissionLease, now: Int64) {
        openRelays(for: request, lease: lease, now: now)
    }

    /// Makes and answers the allocation of `request` with the relayed addresses that opened; with
    /// none (`relays` nil) the lease goes back and the answer is 440 or 508.
    func createAllocation(
        _ request: AllocateRequest, lease: AdmissionLease,
        relays: ((TransportAddress, RelaySocket), (TransportAddress, RelaySocket)?, AddressErrorCode?)?, now: Int64
    ) {
        let origin = request.origin
        let fiveTuple = origin.fiveTuple
        let key = request.auth.key
        guard let (first, second, addressError) = relays else {
            tables.ledger.release(lease)
            if request.token == nil && !request.dual
                && !context.relayAddresses.contains(where: { $0.bound.family == request.family })
            {
                return sendError(.addressFamilyNotSupported, to: request.reply, origin: origin, key: key)
            }
            return refuse(.insufficientCapacity, to: request.reply, origin: origin, key: key)
        }
        let (relay, socket) = first
        let lifetime = allocateLifetime(requested: request.requestedLifetime)
        let advertised = advertisedForm(of: relay)
        let allocation = Allocation(
            origin: origin,
            main: RelayEndpoint(
                relayedAddress: relay, advertisedAddress: advertised, relaySocket: socket, expiry: now + lifetime),
            username: request.auth.username, key: key.bytes, transactionID: request.reply.transactionID, now: now,
            lease: lease)
        if let (relay, socket) = second {
            allocation.additional = RelayEndpoint(
                relayedAddress: relay, advertisedAddress: advertisedForm(of: relay), relaySocket: socket,
                expiry: allocation.expiry)
        }
        if request.tcp { allocation.tcpRelay = TCPRelayState() }
        allocation.credentials = request.auth.credentials
        allocation.tenant = request.auth.tenant
        noteTenant(of: allocation)
        counters.allocationsByCredentials[request.auth.credentials.index] &+= 1
        if lease.bytesPerSecond > 0 { allocation.bandwidth = BandwidthBudget(bytesPerSecond: lease.bytesPerSecond) }
        if request.dontFragment {
            allocation.dontFragment = true
            outbox.emit(.setDontFragment(socket))
            if let additional = allocation.additional { outbox.emit(.setDontFragment(additional.relaySocket)) }
        }
        var reservation: UInt64? = nil
        if request.evenPort?.reservePair == true {
            // The pool reserved the successor with the port (RFC 8656 §7.2, §18.10).
            let value = random.next()
            let entry = ReservationTable.Entry(
                address: relay.ip, port: relay.port + 1, expiry: now + Self.reservationSeconds)
            reservations[value] = entry
            tables.reservations.insert(value, entry)
            journalReserved(value, entry)
            reservation = value
        }
        allocation.sessionID = random.next()
        if request.mobile { registerMobile(allocation) }
        table.insert(allocation)
        publish(allocation)
        counters.allocationsCreated += 1
        let ticket = request.mobile ? ticket(for: allocation) : nil
        let response = respond(to: request.reply, origin: origin, messageClass: .successResponse, key: key) {
            w throws(StunEncodeError) in
            try appendAllocateSuccess(
                &w, of: allocation, lifetime: lifetime,
                addressError: addressError.map { ($0, draft: request.draftAddressError) }, reservation: reservation,
                ticket: ticket)
        }
        // Kept for retransmissions (`resendAllocateResponse`): only what cannot be written again
        // the same from the allocation is kept as bytes.
        if addressError == nil && reservation == nil && ticket == nil {
            allocation.rebuildsAllocateResponse = response != nil
            allocation.allocateFingerprinted = request.reply.fingerprinted
            allocation.allocateIntegritySHA256 = key.sha256
        } else if let response {
            allocation.allocateResponse = Array(response)
        }
        outbox.emit(
            .session(.started(
                SessionStart(
                    session: allocation.session, fiveTuple: fiveTuple, clientSocket: allocation.origin.socket, relayed: advertised, bound: relay,
                    additionalRelayed: allocation.additional?.advertisedAddress, user: request.userID,
                    credentials: request.auth.credentials, lifetimeSeconds: lifetime,
                    tenant: lease.tenant))))
    }

    /// ADDITIONAL-ADDRESS-FAMILY under coturn's draft code point (`AttributeType
    /// .additionalAddressFamilyDraft`), which `turnutils_uclient -Z` sends; nil when absent.
    func draftAdditionalFamily(in message: StunMessage) throws(StunDecodeError) -> AdditionalAddressFamily? {
        guard let raw = message.attribute(.additionalAddressFamilyDraft) else { return nil }
        return try AdditionalAddressFamily(decoding: raw.value, transactionID: message.transactionID)
    }

    /// The advertised form (`external-ip`) of a relayed address, or the address itself.
    func advertisedForm(of relay: TransportAddress) -> TransportAddress {
        TransportAddress(ip: context.relayAddresses.first { $0.bound == relay.ip }?.advertised ?? relay.ip, port: relay.port)
    }

    /// Lifetime of a new allocation: the default 600 s unless the client asks for longer, capped at
    /// `max-allocate-lifetime` (RFC 8656 §7.2).
    func allocateLifetime(requested: Lifetime?) -> Int64 {
        let maximum = Int64(settings.maxAllocateLifetime)
        let defaultLifetime = min(Int64(600), maximum)
        guard let requested else { return defaultLifetime }
        return max(defaultLifetime, min(Int64(requested.seconds), maximum))
    }
}
