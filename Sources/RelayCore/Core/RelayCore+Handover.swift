import StunCodec

/// A live upgrade hands this core's UDP allocations to another process (docs/live-upgrade.md):
/// the I/O layer passes their relay sockets on with a snapshot (`journalAllocations`), and once
/// the other process serves them this core lets them go.
extension RelayCore {
    /// One relay socket of a UDP allocation: whose (`JournalAllocation.sessionID`), which of its
    /// relayed addresses (RFC 8656 §7.2 step 9), and the socket.
    public struct HandedRelaySocket: Sendable {
        public var session: UInt64
        public var additional: Bool
        public var address: TransportAddress
        public var socket: RelaySocket
    }

    /// The relay sockets of every UDP client's allocation; TCP, TLS and DTLS clients' allocations
    /// stay with their connections, which cannot move.
    public func udpRelaySockets() -> [HandedRelaySocket] {
        assertOwned()
        var sockets: [HandedRelaySocket] = []
        for allocation in table.all where allocation.origin.fiveTuple.transport == .udp {
            sockets.append(
                HandedRelaySocket(
                    session: allocation.sessionID, additional: false, address: allocation.main.relayedAddress,
                    socket: allocation.main.relaySocket))
            if let additional = allocation.additional {
                sockets.append(
                    HandedRelaySocket(
                        session: allocation.sessionID, additional: true, address: additional.relayedAddress,
                        socket: additional.relaySocket))
            }
        }
        return sockets
    }

    /// Lets go of every UDP client's allocation, now served by another process: each ends with
    /// reason `handedOver` (its relay sockets closed here, its ports and lease given back), and
    /// the UDP listeners are forgotten. How many ended.
    @discardableResult
    public func releaseHandedOver(now: Int64) -> Int {
        assertOwned()
        let handed = table.all.filter { $0.origin.fiveTuple.transport == .udp }
        for allocation in handed { delete(allocation, reason: .handedOver, now: now) }
        udpListeners.removeAll()
        discoveries = [:]
        return handed.count
    }
}
