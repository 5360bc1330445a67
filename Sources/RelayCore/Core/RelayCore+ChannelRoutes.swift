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

    /// Withdraws the route of each channel of a UDP allocation that `ending` picks (every channel
    /// by default): the channel ends (RFC 8656 §12: it expired, its allocation ended, RFC 8656 §7,
    /// §8), or a data plane outside the core must no longer relay it (its permission ends, RFC 8656
    /// §9; its relayed address ends, RFC 8656 §8.1; its client moves, RFC 8016 §3.2.2; the peer
    /// policy now denies its peer). Call it before the allocation forgets the channels or changes
    /// its relayed addresses: a route names both. The one place routes are withdrawn.
    func withdrawChannelRoutes(of allocation: Allocation, where ending: (ChannelBinding) -> Bool = { _ in true }) {
        guard allocation.origin.fiveTuple.transport == .udp else { return }
        for channel in allocation.channels where ending(channel) {
            outbox.emit(.removeChannel(route(for: channel, of: allocation)))
        }
    }

    /// Before `allocation.sweep(now:)`: withdraws the route of each channel that ends now, or
    /// whose permission ends now (RFC 8656 §9, §12; the channel itself may live on, and is
    /// announced again if a CreatePermission or ChannelBind renews the permission).
    func withdrawEndingChannels(of allocation: Allocation, now: Int64) {
        guard !allocation.channels.isEmpty else { return }
        withdrawChannelRoutes(of: allocation) { channel in
            channel.expiry <= now
                || allocation.permissions.contains { $0.peer == channel.peer.ip && $0.expiry <= now }
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
        guard let allocation = table.allocation(onRelaySocket: relaySocket) else { return false }
        allocation.traffic += relayed
        return true
    }
}
