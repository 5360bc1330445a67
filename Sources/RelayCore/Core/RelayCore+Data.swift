import StunCodec

extension RelayCore {
    /// Send indication (RFC 8656 §11.2): relays DATA to XOR-PEER-ADDRESS if a permission
    /// exists and the peer policy allows the exact transport address. Failures are silent drops.
    func handleSendIndication(_ message: StunMessage, from origin: ClientOrigin, now: Int64) {
        guard let allocation = table[origin.fiveTuple] else { return counters.drop(.noAllocation) }
        // A TCP allocation relays over its data connections only (RFC 6062 §5.5).
        guard allocation.tcpRelay == nil else { return counters.drop(.unexpectedMessage) }
        // An indication with unknown comprehension-required attributes is discarded (RFC 8489 §6.3.2).
        guard unknownComprehensionRequired(in: message) == nil else { return counters.drop(.malformed) }
        guard let peerAttribute = message.attribute(.xorPeerAddress), let data = message.attribute(.data),
            let peer = try? XORPeerAddress(decoding: peerAttribute.value, transactionID: message.transactionID)
        else { return counters.drop(.malformed) }
        // One of relayd's own relayed addresses passes here; `sendToPeer` delivers it only to a
        // live allocation.
        guard allocation.serves(peer.address.ip.family), allowsLiveRelayed(peer.address, tenant: allocation.tenant)
        else { return counters.drop(.policy) }
        guard allocation.hasPermission(for: peer.address.ip, now: now) else { return counters.drop(.noPermission) }
        // DONT-FRAGMENT on the indication (RFC 8656 §11.2): DF on this datagram, unless the
        // allocation's socket sets it on all of them already (DONT-FRAGMENT on Allocate).
        let dontFragment = !allocation.dontFragment && message.contains(.dontFragment)
        sendToPeer(data.value, allocation: allocation, peer: peer.address, dontFragment: dontFragment, now: now)
    }

    /// ChannelData from a client (RFC 8656 §12.6): forwarded to the channel's peer as plain UDP.
    func handleClientChannelData(_ bytes: UnsafeRawBufferPointer, from origin: ClientOrigin, now: Int64) {
        let frame: ChannelDataMessage
        do {
            frame = try ChannelDataMessage(parsing: bytes, padded: origin.fiveTuple.transport.isStream)
        } catch {
            return counters.drop(.malformed)
        }
        guard let allocation = table[origin.fiveTuple] else { return counters.drop(.noAllocation) }
        guard let channel = allocation.channel(number: frame.channelNumber, now: now) else {
            return counters.drop(.noChannel)
        }
        guard allocation.hasPermission(for: channel.peer.ip, now: now) else { return counters.drop(.noPermission) }
        sendToPeer(frame.data, allocation: allocation, peer: channel.peer, now: now)
    }

    @inline(__always)
    func sendToPeer(
        _ payload: UnsafeRawBufferPointer, allocation: Allocation, peer: TransportAddress, dontFragment: Bool = false,
        now: Int64
    ) {
        guard outbox.packets.count < outbox.packetCapacity else { return counters.drop(.outboxFull) }
        if let budget = allocation.bandwidth, !budget.admit(.toPeer, bytes: payload.count, now: now) {
            return counters.drop(.bandwidth)
        }
        allocation.traffic.packetsToPeer &+= 1
        allocation.traffic.bytesToPeer &+= UInt64(payload.count)
        counters.packetsToPeer &+= 1
        counters.bytesToPeer &+= UInt64(payload.count)
        var destination = peer
        if isOwnRelayIP(peer.ip) {
            let relayPort = context.isRelayPort(peer.port)
            if relayPort && shortCircuit(payload, from: allocation, to: peer, now: now) { return }
            destination = context.boundForm(of: peer)
            if relayPort && deliverAcrossLoops(payload, from: allocation, to: peer, bound: destination, now: now) {
                return
            }
            // No table of live allocations had it: through the socket only to a port a live
            // allocation holds (a DTLS client's), never to another socket on the relay's address.
            if relayPort && !holdsRelayedAddress(destination, tcp: false) {
                return takeBack(payload.count, sentBy: allocation, now: now)
            }
        }
        outbox.enqueue(
            payload, route: .peer(relaySocket: allocation.relaySocket(for: peer.ip.family), peer: destination),
            dontFragment: dontFragment)
    }

    /// A packet counted towards a peer that turned out to be a relayed address no live allocation
    /// holds: counted as dropped by the policy instead, its bytes back in the `max-bps` budget.
    private func takeBack(_ bytes: Int, sentBy allocation: Allocation, now: Int64) {
        allocation.bandwidth?.refund(.toPeer, bytes: bytes, now: now)
        allocation.traffic.packetsToPeer &-= 1
        allocation.traffic.bytesToPeer &-= UInt64(bytes)
        counters.packetsToPeer &-= 1
        counters.bytesToPeer &-= UInt64(bytes)
        counters.drop(.policy)
    }

    /// Whether `ip` is one of this server's relay addresses (bound or advertised form): a cheap
    /// test before the short-circuit's table lookup, over a handful of addresses.
    @inline(__always)
    func isOwnRelayIP(_ ip: IPAddress) -> Bool {
        context.relayAddresses.contains { $0.bound == ip || $0.advertised == ip }
    }

    /// Relay-to-relay short-circuit: when `peer` is the relayed address of another
    /// allocation on this thread (the everyday case of both call parties on one relay), the
    /// payload goes straight to that allocation's client, framed exactly as if it had arrived on
    /// its relay socket from `from`'s relayed address, in the form the target knows it by
    /// (`knownForm`: behind 1:1 NAT the advertised `external-ip` form, which also works where the
    /// cloud does not hairpin). It passes the same permission and policy checks as the socket path. The
    /// payload is copied into the outbox's arena so the client's receive buffer is never written.
    /// Returns false when `peer` is not such an allocation (the caller sends through the socket).
    func shortCircuit(_ payload: UnsafeRawBufferPointer, from: Allocation, to peer: TransportAddress, now: Int64)
        -> Bool
    {
        guard let target = table.allocation(atRelayed: peer), target !== from else { return false }
        // Two tenants' allocations relay to each other only when both allow it (docs/tenants.md).
        guard context.tenants.mayRelay(between: from.tenant, and: target.tenant) else {
            counters.drop(.policy)
            return true
        }
        let relayed = from.relayed(for: peer.ip.family)
        let source = target.permissions.knownForm(advertised: relayed.advertised, bound: relayed.bound, now: now)
        guard let copy = copyToScratch(payload) else { return false }
        counters.shortCircuited &+= 1
        if deliverToClient(target, from: source, buffer: copy.region, payload: copy.payload, liveSource: true, now: now) {
            outbox.claim(copy.region.count)
        }
        return true
    }

    /// `payload` copied into unclaimed outbox scratch with `peerHeadroom`/`peerTailroom` around
    /// it, laid out as a relay-socket read, so a short-circuited packet is framed in place without
    /// writing the client's receive buffer; the caller claims the region once the packet is
    /// queued. Nil when the arena is full (the plain socket path needs no copy).
    @inline(__always)
    func copyToScratch(_ payload: UnsafeRawBufferPointer) -> (region: UnsafeMutableRawBufferPointer, payload: Range<Int>)? {
        let headroom = RelayCore.peerHeadroom
        guard let region = outbox.scratch(count: headroom + payload.count + RelayCore.peerTailroom) else { return nil }
        if let base = payload.baseAddress {
            (region.baseAddress! + headroom).copyMemory(from: base, byteCount: payload.count)
        }
        return (region, headroom..<headroom + payload.count)
    }

    /// A UDP datagram from a peer at an allocation's relay socket (RFC 8656 §11.3, §12.7): relayed
    /// to the client as ChannelData when a channel is bound to the peer, else as a Data indication.
    ///
    /// The payload sits at `payload` inside `buffer`, with `peerHeadroom` bytes free before it and
    /// `peerTailroom` after it: the header is written in place in front, nothing is copied.
    public func handlePeerPacket(
        relaySocket: RelaySocket, from peer: TransportAddress, buffer: UnsafeMutableRawBufferPointer, payload: Range<Int>,
        now: Int64
    ) {
        assertOwned()
        guard let allocation = table.allocation(onRelaySocket: relaySocket) else { return counters.drop(.noAllocation) }
        let source = context.externalMappings.isEmpty ? peer : sourceAsKnown(peer, by: allocation, now: now)
        deliverToClient(allocation, from: source, buffer: buffer, payload: payload, now: now)
    }

    /// The form in which `allocation`'s client knows a peer behind `external-ip`. Only relayd's
    /// own relayed addresses have two forms: a packet from one of them (a relay-to-relay packet
    /// that went through the sockets) takes the advertised form, the one XOR-RELAYED-ADDRESS told
    /// its client, unless the client permitted only the bound form (it addressed the peer so).
    /// Every other peer keeps its real address, which is what the client's permission names
    /// (RFC 8656 §9; docs/external-ip.md).
    @inline(__always)
    func sourceAsKnown(_ peer: TransportAddress, by allocation: Allocation, now: Int64) -> TransportAddress {
        guard let advertised = context.advertisedForm(of: peer) else { return peer }
        return allocation.permissions.knownForm(advertised: advertised, bound: peer, now: now)
    }

    /// Frames a peer's payload for `allocation`'s client (ChannelData if a channel is bound to
    /// the peer, else a Data indication) in place in `buffer` and queues it; false if dropped.
    /// `liveSource`: the peer is the relayed address of a live allocation of this loop (the
    /// relay-to-relay short-circuit), so the pool need not be asked.
    @discardableResult
    func deliverToClient(
        _ allocation: Allocation, from peer: TransportAddress, buffer: UnsafeMutableRawBufferPointer,
        payload: Range<Int>, liveSource: Bool = false, now: Int64
    ) -> Bool {
        guard allocation.hasPermission(for: peer.ip, now: now) else {
            counters.drop(.noPermission)
            return false
        }
        // A permission is per IP (RFC 8656 §9), but the policy judges the whole transport address:
        // e.g. a permission for a relay address must not let the host's other ports in, nor a
        // socket on a relay port no live allocation holds.
        guard
            liveSource
                ? allowsLiveRelayed(peer, tenant: allocation.tenant) : peerAllowed(peer, tenant: allocation.tenant)
        else {
            counters.drop(.policy)
            return false
        }
        guard outbox.packets.count < outbox.packetCapacity else {
            counters.drop(.outboxFull)
            return false
        }
        let channel = allocation.channel(peer: peer, now: now)?.number
        guard
            let framed = frameForClient(
                buffer: buffer, payload: payload, from: peer, channelNumber: channel,
                stream: allocation.origin.fiveTuple.transport.isStream)
        else { return false }
        if let budget = allocation.bandwidth, !budget.admit(.toClient, bytes: payload.count, now: now) {
            counters.drop(.bandwidth)
            return false
        }
        queueForClient(framed, route: .client(allocation.origin), payloadCount: payload.count)
        allocation.traffic.packetsToClient &+= 1
        allocation.traffic.bytesToClient &+= UInt64(payload.count)
        return true
    }

    /// Queues a framed packet for a client and counts its payload as relayed to the client.
    @inline(__always)
    func queueForClient(_ framed: UnsafeRawBufferPointer, route: Route, payloadCount: Int) {
        outbox.enqueue(framed, route: route)
        counters.packetsToClient &+= 1
        counters.bytesToClient &+= UInt64(payloadCount)
    }

    /// Writes the header for a payload from `peer` in front of it, in place in `buffer`
    /// (`peerHeadroom` bytes free before `payload`, `peerTailroom` after): ChannelData when
    /// `channelNumber` is given (RFC 8656 §12.7, padded to 4 bytes over streams), else a Data
    /// indication (RFC 8656 §11.3). Nil (counted) if the indication does not fit.
    func frameForClient(
        buffer: UnsafeMutableRawBufferPointer, payload: Range<Int>, from peer: TransportAddress, channelNumber: UInt16?,
        stream: Bool
    ) -> UnsafeRawBufferPointer? {
        precondition(payload.lowerBound >= RelayCore.peerHeadroom && payload.upperBound + RelayCore.peerTailroom <= buffer.count)
        if let channelNumber {
            let start = payload.lowerBound - ChannelDataMessage.headerLength
            ChannelDataMessage.writeHeader(
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[start...]), channelNumber: channelNumber,
                length: payload.count)
            let end = start + ChannelDataMessage.encodedLength(dataLength: payload.count, padded: stream)
            for i in payload.upperBound..<end { buffer[i] = 0 }
            return UnsafeRawBufferPointer(rebasing: buffer[start..<end])
        }
        let addressLength = peer.ip.family == .ipv4 ? 8 : 20
        let start = payload.lowerBound - StunConstants.headerLength - 4 - addressLength - 4
        let region = UnsafeMutableRawBufferPointer(rebasing: buffer[start...])
        let transactionID = TransactionID(high: UInt32(truncatingIfNeeded: random.next()), low: random.next())
        do {
            var w = try StunMessageWriter(
                into: region, type: MessageType(method: .data, messageClass: .indication), transactionID: transactionID)
            try w.append(XORPeerAddress(address: peer))
            try w.appendAttribute(.data, length: payload.count) { _ in }
            if settings.fingerprint { try w.appendFingerprint() }
            return UnsafeRawBufferPointer(rebasing: buffer[start..<start + w.count])
        } catch {
            counters.drop(.outboxFull)
            return nil
        }
    }
}
