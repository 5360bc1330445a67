import StunCodec

extension RelayCore {
    /// The route a data plane outside the core needs for `channel` of a UDP allocation
    /// (`CoreCommand.installChannel`). Its expiry is the earliest of the channel's (RFC 8656 §12),
    /// the permission's for the peer's IP (RFC 8656 §9) and the allocation's (RFC 8656 §7), so a
    /// data plane that checks it can never relay past any of them, however late a removal comes.
    func route(for channel: ChannelBinding, of allocation: Allocation) -> ChannelRoute {
        var permissionExpiry: Int64 = 0
        for permission in allocation.permissions where permission.peer == channel.peer.ip {
            permissionExpiry = permission.expiry
        }
        return ChannelRoute(
            client: allocation.origin.fiveTuple.client, server: allocation.origin.fiveTuple.server,
            clientSocket: allocation.origin.socket, number: channel.number, peer: channel.peer,
            relayed: allocation.relayed(for: channel.peer.ip.family).bound,
            relaySocket: allocation.relaySocket(for: channel.peer.ip.family),
            expiry: min(channel.expiry, permissionExpiry, allocation.expiry(for: channel.peer.ip.family)),
            peerIsRelayed: isOwnRelayIP(channel.peer.ip) && context.isRelayPort(channel.peer.port))
    }

    /// Announces the current route of each live channel of a UDP allocation to a peer in
    /// `peerIPs` (nil: every channel), after a ChannelBind, CreatePermission or Refresh moved an
    /// expiry. Stream clients' channels are not announced: their ChannelData is framed in a byte
    /// stream the kernel fast path does not parse.
    ///
    /// Not announced either: an allocation with a `max-bps` budget (the core meters each of its
    /// packets), one with DONT-FRAGMENT (its relay socket enforces it; the kernel's redirect would
    /// not), and a channel to one of relayd's own relayed addresses in its `external-ip` public
    /// form (the core maps the forms, docs/external-ip.md).
    func announceChannels(of allocation: Allocation, peerIPs: [IPAddress]?, now: Int64) {
        guard allocation.origin.fiveTuple.transport == .udp, allocation.bandwidth == nil, !allocation.dontFragment
        else { return }
        for channel in allocation.channels where channel.expiry > now {
            if let peerIPs, !peerIPs.contains(channel.peer.ip) { continue }
            guard context.boundForm(of: channel.peer) == channel.peer else { continue }
            let route = route(for: channel, of: allocation)
            guard route.expiry > now else { continue }
            outbox.emit(.installChannel(route))
        }
    }

    /// Before `allocation.sweep(now:)`: withdraws the route of each channel that ends now, or
    /// whose permission ends now (the channel itself may live on, and is announced again if a
    /// CreatePermission or ChannelBind renews the permission).
    func withdrawEndingChannels(of allocation: Allocation, now: Int64) {
        guard allocation.origin.fiveTuple.transport == .udp, !allocation.channels.isEmpty else { return }
        for channel in allocation.channels {
            let permissionEnds = allocation.permissions.contains { $0.peer == channel.peer.ip && $0.expiry <= now }
            if channel.expiry <= now || permissionEnds {
                outbox.emit(.removeChannel(route(for: channel, of: allocation)))
            }
        }
    }

    /// Packets a data plane outside the core relayed for the allocation on `relaySocket`: added
    /// to its traffic (if it is still live) and to this loop's counters, so `/metrics`, the
    /// session summary and quotas see them. False when no live allocation owns the socket.
    @discardableResult
    public func addRelayedOutsideCore(_ relayed: TrafficCounters, relaySocket: RelaySocket) -> Bool {
        counters.packetsToPeer &+= relayed.packetsToPeer
        counters.bytesToPeer &+= relayed.bytesToPeer
        counters.packetsToClient &+= relayed.packetsToClient
        counters.bytesToClient &+= relayed.bytesToClient
        guard let allocation = bySocket[relaySocket] else { return false }
        allocation.traffic += relayed
        return true
    }
}
