import StunCodec

extension RelayCore {
    /// The relay-to-relay short-circuit across loop threads: `peer` (in the form the
    /// sender addressed it; `bound` is its bound form) is the relayed address of an allocation
    /// on another loop. Instead of leaving through `from`'s relay socket and waking the other
    /// loop at the target's relay socket, the payload is framed here exactly as the target would
    /// frame it (source = `from`'s relayed address in the form the target knows, `knownForm`; ChannelData if
    /// the target bound a channel to it, else a Data indication) and leaves through this loop's
    /// own SO_REUSEPORT listener on the target client's server address: the same 5-tuple the
    /// target's answers use. The checks are the target's: a live allocation, a live permission
    /// for the source's IP (RFC 8656 §9), the peer policy for the source address, and the target's
    /// `max-bps` budget towards its client.
    ///
    /// When the target has a TCP/TLS client, the framed packet (ChannelData padded for the
    /// stream, RFC 8656 §12.5) becomes a `deliverToStream` command: at the flush this loop's I/O
    /// layer queues it on the connection (`StreamSink`), which is written to the socket at the
    /// end of this loop's iteration: the owning loop is not woken.
    ///
    /// Returns false when no other loop has such an allocation, or this loop has no listener on
    /// its server address: the caller then sends through the socket as before.
    func deliverAcrossLoops(
        _ payload: UnsafeRawBufferPointer, from: Allocation, to peer: TransportAddress, bound: TransportAddress,
        now: Int64
    ) -> Bool {
        guard context.threadCount > 1 else { return false }
        guard let copy = copyToScratch(payload) else { return false }
        let relayed = from.relayed(for: peer.ip.family)
        // Two tenants' allocations relay to each other only when both allow it (docs/tenants.md).
        guard tenantMayReach(bound, from: from.tenant, tcp: false) else {
            counters.drop(.policy)
            return true
        }
        // The sender's own relayed address: a live allocation holds it.
        let advertisedAllowed = allowsLiveRelayed(relayed.advertised, tenant: from.tenant)
        let forms = RelayedAddressDirectory.SourceForms(
            advertised: relayed.advertised, bound: relayed.bound, advertisedAllowed: advertisedAllowed,
            boundAllowed: relayed.advertised == relayed.bound
                ? advertisedAllowed : allowsLiveRelayed(relayed.bound, tenant: from.tenant))
        let delivery: RelayedAddressDirectory.Delivery
        switch tables.directory.deliver(to: bound, from: forms, bytes: payload.count, now: now) {
        case .notFound:
            return false
        case .noPermission:
            counters.drop(.noPermission)
            return true
        case .policy:
            counters.drop(.policy)
            return true
        case .bandwidth:
            counters.drop(.bandwidth)
            return true
        case .deliver(let found):
            delivery = found
        }
        if let sink = delivery.sink {
            let queued = writeAcrossLoops(
                copy, from: delivery.source, to: sink, channelNumber: delivery.channelNumber, target: bound)
            if !queued { tables.directory.retract(bound, bytes: payload.count, now: now) }
            return true
        }
        guard let socket = udpListener(for: delivery.server) else {
            tables.directory.retract(bound, bytes: payload.count, now: now)
            return false
        }
        guard
            let framed = frameForClient(
                buffer: copy.region, payload: copy.payload, from: delivery.source, channelNumber: delivery.channelNumber,
                stream: false)
        else {
            tables.directory.retract(bound, bytes: payload.count, now: now)
            return true
        }
        outbox.claim(copy.region.count)
        let origin = ClientOrigin(
            fiveTuple: FiveTuple(client: delivery.client, server: delivery.server, transport: .udp), socket: socket)
        queueForClient(framed, route: .client(origin), payloadCount: payload.count)
        counters.shortCircuited &+= 1
        return true
    }

    /// Frames the payload in `copy` for a stream client and asks the I/O layer to queue it on the
    /// client's connection `sink` at the flush (`CoreCommand.deliverToStream`); the core never
    /// calls into a connection. Counted as delivered now; `streamDeliveryRefused` takes it back.
    /// False when it could not be framed (dropped here).
    private func writeAcrossLoops(
        _ copy: (region: UnsafeMutableRawBufferPointer, payload: Range<Int>), from source: TransportAddress,
        to sink: any StreamSink, channelNumber: UInt16?, target: TransportAddress
    ) -> Bool {
        guard
            let framed = frameForClient(
                buffer: copy.region, payload: copy.payload, from: source, channelNumber: channelNumber, stream: true)
        else { return false }
        outbox.claim(copy.region.count)
        outbox.emit(
            .deliverToStream(StreamDelivery(sink: sink, bytes: framed, target: target, payloadCount: copy.payload.count)))
        counters.packetsToClient &+= 1
        counters.bytesToClient &+= UInt64(copy.payload.count)
        counters.shortCircuited &+= 1
        return true
    }

    /// The connection of a `deliverToStream` command would not take the packet (it is closing,
    /// or over its output bound): the packet is counted as dropped (no allocation), not delivered.
    public func streamDeliveryRefused(_ delivery: StreamDelivery, now: Int64) {
        assertOwned()
        tables.directory.retract(delivery.target, bytes: delivery.payloadCount, now: now)
        counters.drop(.noAllocation)
        counters.packetsToClient &-= 1
        counters.bytesToClient &-= UInt64(delivery.payloadCount)
        counters.shortCircuited &-= 1
    }

    /// This loop's UDP listener socket on `server`.
    @inline(__always)
    func udpListener(for server: TransportAddress) -> ClientSocket? {
        for listener in udpListeners where listener.address == server { return listener.socket }
        return nil
    }
}
