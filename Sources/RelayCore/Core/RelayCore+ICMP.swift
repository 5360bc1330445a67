import StunCodec

extension RelayCore {
    /// ICMP errors passed to one allocation's client per second at most; the rest are dropped
    /// (counted as `icmp`). A client sending media to a closed port would otherwise get one Data
    /// indication per packet (docs/icmp.md).
    public static let icmpIndicationsPerSecond = 5

    /// An ICMP error for a datagram an allocation's relay socket sent to `peer` (RFC 8656 §11.5):
    /// when the allocation has a permission for the peer's IP (ports are not compared), the
    /// client gets a Data indication with XOR-PEER-ADDRESS and the ICMP attribute, and no DATA.
    /// The I/O layer has already kept only the types and codes the RFC relays.
    public func handlePeerICMP(relaySocket: RelaySocket, peer: TransportAddress, icmp: ICMP, now: Int64) {
        assertOwned()
        guard let allocation = table.allocation(onRelaySocket: relaySocket) else { return counters.drop(.noAllocation) }
        guard allocation.hasPermission(for: peer.ip, now: now) else { return counters.drop(.noPermission) }
        if allocation.icmpSecond != now {
            allocation.icmpSecond = now
            allocation.icmpSent = 0
        }
        guard allocation.icmpSent < RelayCore.icmpIndicationsPerSecond else { return counters.drop(.icmp) }
        guard outbox.hasRoomForResponse else { return counters.drop(.outboxFull) }
        let known = context.externalMappings.isEmpty ? peer : sourceAsKnown(peer, by: allocation, now: now)
        let buffer = outbox.scratch()
        let transactionID = TransactionID(high: UInt32(truncatingIfNeeded: random.next()), low: random.next())
        do {
            var w = try StunMessageWriter(
                into: buffer, type: MessageType(method: .data, messageClass: .indication), transactionID: transactionID)
            try w.append(XORPeerAddress(address: known))
            try w.append(icmp)
            if settings.fingerprint { try w.appendFingerprint() }
            outbox.commitScratch(length: w.count, route: .client(allocation.origin))
        } catch {
            return counters.drop(.outboxFull)
        }
        allocation.icmpSent += 1
        counters.icmpIndications &+= 1
    }
}
