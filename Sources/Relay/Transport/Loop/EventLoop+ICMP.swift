import RelayCore
import StunCodec

extension EventLoop {
    /// Reads a relay socket's error queue (docs/icmp.md): each ICMP error for a datagram the
    /// socket sent goes to the core, which tells the allocation's client (RFC 8656 §11.5). At most
    /// `errorsPerWakeup` entries; the rest keep the socket readable. A datagram this host refused
    /// is tried twice (`SendBatch.send`), and each try queues the same local error: a local error
    /// equal to the one read just before it is counted as dropped, not reported again.
    func relayErrors(_ fd: Int32, now: Int64) {
        var previousLocal: (TransportAddress, ICMP)?
        var read = 0
        while read < EventLoop.errorsPerWakeup, let entry = UDPSocket.readQueuedError(fd) {
            read += 1
            guard case .datagram(let destination, let icmp?, let local) = entry else {
                core.counters.drop(.icmp)
                continue
            }
            if local, let (address, reported) = previousLocal, address == destination, reported == icmp {
                core.counters.drop(.icmp)
                continue
            }
            previousLocal = local ? (destination, icmp) : nil
            core.handlePeerICMP(relaySocket: RelaySocket(descriptor: fd), peer: destination, icmp: icmp, now: now)
            if core.outbox.needsFlush { flush() }
        }
        guard read > 0 else { return }
        UDPSocket.clearPendingError(fd)
        if !core.outbox.packets.isEmpty { flushEvent?.activate() }
    }

    /// Error-queue entries read per readable event of a relay socket.
    static let errorsPerWakeup = 64
}
