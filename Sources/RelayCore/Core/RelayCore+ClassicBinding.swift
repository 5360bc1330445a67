import StunCodec

extension RelayCore {
    /// An RFC 3489 Binding request (no magic cookie), with `rfc3489-compatibility`: MAPPED-ADDRESS,
    /// SOURCE-ADDRESS and, with an alternate address, CHANGED-ADDRESS (RFC 3489 §11.2), the
    /// 16-byte transaction ID echoed, and CHANGE-REQUEST honoured as in RFC 5780 §6.1, for the
    /// classic NAT type tests (docs/nat-discovery.md). UDP only; never to a third party.
    func handleClassicBinding(_ bytes: UnsafeRawBufferPointer, from origin: ClientOrigin, now: Int64) {
        let request: ClassicBindingRequest
        do {
            request = try ClassicBindingRequest(parsing: bytes)
        } catch {
            counters.drop(.malformed)
            return
        }
        counters.bindingRequests += 1
        let discovery = settings.rfc5780 ? discoveries[origin.fiveTuple.server] : nil
        var from = (address: origin.fiveTuple.server, socket: origin.socket)
        if let change = request.changeRequest, change.changeIP || change.changePort {
            // Without an alternate address the classic client hears nothing, as from an RFC 3489
            // server that has none; with one, the answer comes from it, rate-limited per IP.
            guard let discovery else {
                counters.drop(.unexpectedMessage)
                return
            }
            guard context.sourceLimits.challenges.allow(origin.fiveTuple.client.ip, now: now) else {
                counters.drop(.rateLimited)
                return
            }
            from = discovery.source(changeIP: change.changeIP, changePort: change.changePort)
        }
        guard outbox.hasRoomForResponse else {
            counters.drop(.outboxFull)
            return
        }
        let buffer = outbox.scratch()
        do {
            // Written as an RFC 8489 message (no attribute depends on the transaction ID), then
            // the classic 16-byte ID put over the cookie and the 12-byte ID.
            var w = try StunMessageWriter(
                into: buffer, type: MessageType(method: .binding, messageClass: .successResponse),
                transactionID: TransactionID(high: 0, low: 0))
            try w.append(MappedAddress(address: origin.fiveTuple.client))
            try w.append(SourceAddress(address: advertisedForm(of: from.address)))
            if let discovery { try w.append(ChangedAddress(address: advertisedForm(of: discovery.other))) }
            let length = w.count
            for (i, byte) in request.transactionID.enumerated() { buffer[4 + i] = byte }
            let route = ClientOrigin(
                fiveTuple: FiveTuple(client: origin.fiveTuple.client, server: from.address, transport: .udp),
                socket: from.socket)
            outbox.commitScratch(length: length, route: .client(route))
        } catch {
            counters.drop(.outboxFull)
        }
    }
}
