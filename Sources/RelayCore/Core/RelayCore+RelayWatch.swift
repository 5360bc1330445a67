extension RelayCore {
    /// Has the I/O layer read `allocation`'s UDP relay sockets from its first permission on
    /// (`CoreCommand.watchRelaySocket`), and lists its relayed addresses for the same loop's
    /// relay-to-relay short-circuit (`AllocationTable.listRelayed`). Before one, every packet
    /// sent to the relayed address is dropped (RFC 8656 §9), so an idle allocation's socket costs
    /// no poll registration and no index entry (docs/benchmark.md, "Node capacity"). `drain`:
    /// drop what the socket queued before, as the permission check would have. An RFC 6062
    /// allocation's relay socket is a TCP listener its own layer reads; it is never watched here.
    func watchRelaySockets(of allocation: Allocation, drain: Bool) {
        guard !allocation.relayWatched, allocation.tcpRelay == nil, !allocation.permissions.isEmpty else { return }
        allocation.relayWatched = true
        table.listRelayed(allocation)
        outbox.emit(.watchRelaySocket(allocation.relaySocket, drain: drain))
        if let additional = allocation.additional {
            outbox.emit(.watchRelaySocket(additional.relaySocket, drain: drain))
        }
    }
}
