import StunCodec

extension RelayCore {
    /// Ends one relayed address of a dual allocation and keeps the other (RFC 8656 §8.1: a Refresh
    /// with REQUESTED-ADDRESS-FAMILY and LIFETIME 0, or that family's lifetime running out). Its
    /// socket closes, its port is released, and the permissions and channels of peers of that
    /// family go with it; those of the other family are untouched. When the first relayed address
    /// ends, the additional one takes its place.
    func endRelay(of family: IPAddress.Family, in allocation: Allocation, now: Int64) {
        guard allocation.additional != nil else { return }
        // The routes first: each names the relayed address of its peer's family.
        withdrawChannelRoutes(of: allocation) { $0.peer.ip.family == family }
        allocation.forgetPeers(of: family)
        guard let ended = table.dropRelay(family: family, of: allocation) else { return }
        closeRelay(ended, of: allocation)
        publish(allocation)
    }

    /// Closes one relayed address of `allocation` that the table no longer lists (RFC 8656 §7,
    /// §8.1): forgets it in the shared directory (adding what other threads delivered through it
    /// to the allocation's traffic), closes its socket and releases its port.
    func closeRelay(_ relay: RelayEndpoint, of allocation: Allocation) {
        unlist(relay.relayedAddress, of: allocation)
        outbox.emit(.closeRelaySocket(relay.relaySocket))
        tables.ports.release(relay.relayedAddress.port, on: relay.relayedAddress.ip)
    }

    /// Takes one relayed address of `allocation` out of the shared directory, adding what other
    /// threads delivered through it to the allocation's traffic.
    func unlist(_ relayed: TransportAddress, of allocation: Allocation) {
        guard context.threadCount > 1 else { return }
        let delivered = tables.directory.remove(relayed)
        allocation.traffic.packetsToClient &+= delivered.packets
        allocation.traffic.bytesToClient &+= delivered.bytes
    }
}
