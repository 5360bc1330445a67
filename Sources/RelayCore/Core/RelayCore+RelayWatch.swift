extension RelayCore {
    /// Has the I/O layer read `allocation`'s UDP relay sockets from its first permission on
    /// (`CoreCommand.watchRelaySocket`). Before one, every packet a peer sends to the relayed
    /// address is dropped (RFC 8656 §9), so an idle allocation's socket costs no poll
    /// registration (docs/benchmark.md, "Node capacity"). `drain`: drop what the socket queued
    /// before, as the permission check would have. An RFC 6062 allocation's relay socket is a
    /// TCP listener its own layer reads; it is never watched here.
    func watchRelaySockets(of allocation: Allocation, drain: Bool) {
        guard !allocation.relayWatched, allocation.tcpRelay == nil, !allocation.permissions.isEmpty else { return }
        allocation.relayWatched = true
        outbox.emit(.watchRelaySocket(allocation.relaySocket, drain: drain))
        if let additional = allocation.additional {
            outbox.emit(.watchRelaySocket(additional.relaySocket, drain: drain))
        }
    }
}
