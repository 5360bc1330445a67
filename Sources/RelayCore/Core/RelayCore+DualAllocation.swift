import StunCodec

extension RelayCore {
    /// Ends one relayed address of a dual allocation and keeps the other (RFC 8656 §8.1: a Refresh
    /// with REQUESTED-ADDRESS-FAMILY and LIFETIME 0, or that family's lifetime running out). Its
    /// socket closes, its port is released, and the permissions and channels of peers of that
    /// family go with it; those of the other family are untouched. When the first relayed address
    /// ends, the additional one takes its place.
    func endRelay(of family: IPAddress.Family, in allocation: Allocation, now: Int64) {
        guard let additional = allocation.additional else { return }
        if allocation.origin.fiveTuple.transport == .udp {
            for channel in allocation.channels where channel.peer.ip.family == family {
                outbox.emit(.removeChannel(route(for: channel, of: allocation)))
            }
        }
        allocation.forgetPeers(of: family)
        if additional.relayedAddress.ip.family == family {
            closeRelay(
                additional.relayedAddress, advertised: additional.advertisedAddress, socket: additional.relaySocket,
                of: allocation)
        } else {
            closeRelay(
                allocation.relayedAddress, advertised: allocation.advertisedAddress, socket: allocation.relaySocket,
                of: allocation)
            allocation.relayedAddress = additional.relayedAddress
            allocation.advertisedAddress = additional.advertisedAddress
            allocation.relaySocket = additional.relaySocket
            allocation.expiry = additional.expiry
        }
        allocation.additional = nil
        publish(allocation)
    }

    /// Closes one relayed address of `allocation`: forgets it in this thread's tables and the
    /// shared directory (adding what other threads delivered through it to the allocation's
    /// traffic), closes its socket and releases its port.
    func closeRelay(
        _ relayed: TransportAddress, advertised: TransportAddress, socket: RelaySocket, of allocation: Allocation
    ) {
        bySocket[socket] = nil
        byRelayedAddress[relayed] = nil
        byRelayedAddress[advertised] = nil
        unlist(relayed, of: allocation)
        outbox.emit(.closeRelaySocket(socket))
        context.ports.release(relayed.port, on: relayed.ip)
    }

    /// Takes one relayed address of `allocation` out of the shared directory, adding what other
    /// threads delivered through it to the allocation's traffic.
    func unlist(_ relayed: TransportAddress, of allocation: Allocation) {
        guard context.threadCount > 1 else { return }
        let delivered = context.directory.remove(relayed)
        allocation.traffic.packetsToClient &+= delivered.packets
        allocation.traffic.bytesToClient &+= delivered.bytes
    }
}
