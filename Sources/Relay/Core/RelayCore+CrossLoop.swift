import StunCodec

extension RelayCore {
    /// The relay-to-relay short-circuit across loop threads (issue #6): `peer` (in the form the
    /// sender addressed it; `bound` is its bound form) is the relayed address of a UDP allocation
    /// on another loop. Instead of leaving through `from`'s relay socket and waking the other
    /// loop at the target's relay socket, the payload is framed here exactly as the target would
    /// frame it (source = `from`'s relayed address in the form the target knows, ChannelData if
    /// the target bound a channel to it, else a Data indication) and leaves through this loop's
    /// own SO_REUSEPORT listener on the target client's server address: the same 5-tuple the
    /// target's answers use. The checks are the target's: a live allocation, a live permission
    /// for the source's IP (RFC 8656 §9), and the peer policy for the source address.
    ///
    /// When the target has a TCP/TLS client, only its own loop may write the stream: the payload
    /// is posted to that loop's `HandOffInbox`, which delivers it as if it had arrived on the
    /// target's relay socket (`handleHandOff`).
    ///
    /// Returns false when no other loop has such an allocation, or this loop has no listener on
    /// its server address: the caller then sends through the socket as before.
    func deliverAcrossLoops(
        _ payload: UnsafeRawBufferPointer, from: Allocation, to peer: TransportAddress, bound: TransportAddress,
        now: Int64
    ) -> Bool {
        guard context.threadCount > 1 else { return false }
        let source = peer == bound ? from.relayedAddress : from.advertisedAddress
        guard let copy = copyToScratch(payload) else { return false }
        let delivery: RelayedAddressDirectory.Delivery
        switch context.directory.deliver(
            to: bound, from: source, allowed: context.policy.isAllowed(source), bytes: payload.count, now: now)
        {
        case .notFound:
            return false
        case .noPermission:
            counters.drop(.noPermission)
            return true
        case .policy:
            counters.drop(.policy)
            return true
        case .deliver(let found):
            delivery = found
        case .handOff(let inbox):
            guard inbox.post(to: bound, from: source, payload: payload) else { return false }
            counters.shortCircuited &+= 1
            return true
        }
        guard let socket = udpListener(for: delivery.server) else { return false }
        guard
            let framed = frameForClient(
                buffer: copy.region, payload: copy.payload, from: source, channelNumber: delivery.channelNumber,
                stream: false)
        else { return true }
        outbox.claim(copy.region.count)
        let origin = ClientOrigin(
            fiveTuple: FiveTuple(client: delivery.client, server: delivery.server, transport: .udp), socket: socket)
        queueForClient(framed, route: .client(origin), payloadCount: payload.count)
        counters.shortCircuited &+= 1
        return true
    }

    /// This loop's UDP listener socket on `server`.
    @inline(__always)
    func udpListener(for server: TransportAddress) -> Int32? {
        for listener in udpListeners where listener.address == server { return listener.socket }
        return nil
    }

    /// A packet another loop handed to this one (`HandOffInbox`) for the allocation at `target`
    /// (bound form): delivered to its client exactly as a datagram from `source` arriving on its
    /// relay socket, with the same permission and policy checks (RFC 8656 §9, §11.3, §12.7).
    /// `payload` sits in `buffer` with `peerHeadroom` and `peerTailroom` free around it.
    public func handleHandOff(
        to target: TransportAddress, from source: TransportAddress, buffer: UnsafeMutableRawBufferPointer,
        payload: Range<Int>, now: Int64
    ) {
        guard let allocation = byRelayedAddress[target] else { return counters.drop(.noAllocation) }
        deliverToClient(allocation, from: source, buffer: buffer, payload: payload, now: now)
    }
}
