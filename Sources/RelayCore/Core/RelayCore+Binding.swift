import StunCodec

extension RelayCore {
    /// Binding request (RFC 8489 §6.3.1): XOR-MAPPED-ADDRESS with the source transport address.
    /// No authentication: STUN servers for ICE answer anyone. With `rfc5780`, NAT behaviour
    /// discovery (RFC 5780 §6.1): MAPPED-ADDRESS, RESPONSE-ORIGIN and OTHER-ADDRESS too, and
    /// CHANGE-REQUEST, RESPONSE-PORT and PADDING honoured (docs/nat-discovery.md).
    func handleBinding(_ message: StunMessage, from origin: ClientOrigin, now: Int64) {
        counters.bindingRequests += 1
        let change: ChangeRequest?
        let responsePort: ResponsePort?
        let padding: RawAttribute?
        do {
            change = try message.decode(ChangeRequest.self)
            responsePort = try message.decode(ResponsePort.self)
            padding = message.attribute(.padding)
        } catch {
            return sendError(.badRequest, to: message, origin: origin, key: nil)
        }
        let changes = change.map { $0.changeIP || $0.changePort } ?? false
        // A CHANGE-REQUEST without flags is what some clients always send: a plain Binding.
        let asksDiscovery = changes || responsePort != nil || padding != nil
        guard asksDiscovery || settings.rfc5780 else {
            return answerBinding(message, origin: origin, discovery: nil)
        }
        guard settings.rfc5780 else {
            var unknown: [AttributeType] = []
            if changes { unknown.append(.changeRequest) }
            if padding != nil { unknown.append(.padding) }
            if responsePort != nil { unknown.append(.responsePort) }
            return sendError(.unknownAttribute, to: message, origin: origin, key: nil) { w throws(StunEncodeError) in
                try w.append(UnknownAttributes(types: unknown))
            }
        }
        // RFC 5780 §6.1, §7.5: these only make sense over UDP, and not together.
        if asksDiscovery && origin.fiveTuple.transport != .udp {
            return sendError(.badRequest, to: message, origin: origin, key: nil)
        }
        if responsePort != nil && padding != nil { return sendError(.badRequest, to: message, origin: origin, key: nil) }
        // Over TCP or TLS there is nothing to change: no alternate address is offered.
        let discovery = origin.fiveTuple.transport == .udp ? discoveries[origin.fiveTuple.server] : nil
        if changes && discovery == nil {
            return sendError(.unknownAttribute, to: message, origin: origin, key: nil) { w throws(StunEncodeError) in
                try w.append(UnknownAttributes(types: [.changeRequest]))
            }
        }
        // A response from another address or to another port is the one a spoofed request could
        // aim elsewhere, and a padded one the largest: it only ever goes to the requester's IP,
        // and is rate-limited per IP. With `rfc5780` a plain answer is about 3.5 times its
        // request (MAPPED-ADDRESS, RESPONSE-ORIGIN, OTHER-ADDRESS), so over UDP, where the source
        // can be spoofed, it is rate-limited per IP as well (docs/nat-discovery.md).
        if asksDiscovery || origin.fiveTuple.transport == .udp {
            guard context.sourceLimits.challenges.allow(origin.fiveTuple.client.ip, now: now) else {
                counters.drop(.rateLimited)
                return
            }
        }
        var destination = origin.fiveTuple.client
        if let responsePort { destination.port = responsePort.port }
        var from = (address: origin.fiveTuple.server, socket: origin.socket)
        if let discovery, changes {
            from = discovery.source(changeIP: change!.changeIP, changePort: change!.changePort)
        }
        let route = ClientOrigin(
            fiveTuple: FiveTuple(client: destination, server: from.address, transport: origin.fiveTuple.transport),
            socket: from.socket)
        answerBinding(
            message, origin: origin, discovery: discovery, route: route, paddingTo: padding.map { _ in message.bytes.count })
    }

    /// The success response: XOR-MAPPED-ADDRESS always; MAPPED-ADDRESS with
    /// `stun-backward-compatibility` or `rfc5780`; RESPONSE-ORIGIN with `rfc5780` (unless the
    /// listener is a wildcard), OTHER-ADDRESS with an alternate address, both in their
    /// `external-ip` public form; PADDING filling up to `paddingTo` bytes of message (the
    /// request's own size: PADDING never makes the response larger than what asked for it).
    private func answerBinding(
        _ message: StunMessage, origin: ClientOrigin, discovery: BehaviourDiscovery?, route: ClientOrigin? = nil,
        paddingTo: Int? = nil
    ) {
        let route = route ?? origin
        let mapped = origin.fiveTuple.client
        let inDiscovery = settings.rfc5780
        let capacity = max(Outbox.maxResponseLength, paddingTo ?? 0)
        guard let buffer = outbox.scratch(count: capacity) else {
            counters.drop(.outboxFull)
            return
        }
        do {
            var w = try StunMessageWriter(
                into: buffer, type: MessageType(method: .binding, messageClass: .successResponse),
                transactionID: message.transactionID)
            try w.append(XORMappedAddress(address: mapped))
            if settings.stunBackwardCompatibility || inDiscovery { try w.append(MappedAddress(address: mapped)) }
            if inDiscovery {
                if !route.fiveTuple.server.ip.isWildcard {
                    try w.append(ResponseOrigin(address: advertisedForm(of: route.fiveTuple.server)))
                }
                if let discovery { try w.append(OtherAddress(address: advertisedForm(of: discovery.other))) }
            }
            try appendSoftware(&w)
            let fingerprint = message.fingerprintOffset != nil || settings.fingerprint
            if let paddingTo {
                // PADDING is always answered (RFC 5780 §6.1), at most as long as brings the response
                // to the request's size; its header (4) and FINGERPRINT (8) count toward it.
                let room = paddingTo - w.count - 4 - (fingerprint ? 8 : 0)
                try w.append(Padding(count: max(0, room) & ~3))
            }
            if fingerprint { try w.appendFingerprint() }
            outbox.commitScratch(length: w.count, route: .client(route))
        } catch {
            counters.drop(.outboxFull)
        }
    }
}
