import StunCodec

extension RelayCore {
    /// ChannelBind (RFC 8656 §12.2): binds or refreshes a channel number for one peer transport
    /// address and installs or refreshes the permission for the peer's IP.
    func handleChannelBind(_ message: StunMessage, from origin: ClientOrigin, now: Int64) {
        let existing = table[origin.fiveTuple]
        guard let auth = authenticate(message, origin: origin, existing: existing, now: now) else { return }
        guard let allocation = existing else {
            return sendError(.allocationMismatch, to: message, origin: origin, key: auth.key)
        }
        // A TCP allocation has no channels (RFC 6062 §5.5: data flows on its data connections).
        guard allocation.tcpRelay == nil, let number = try? message.decode(ChannelNumber.self),
            let peer = try? message.decode(XORPeerAddress.self),
            ChannelDataMessage.channelRange.contains(number.value)
        else {
            return sendError(.badRequest, to: message, origin: origin, key: auth.key)
        }
        if let error = checkPeer(peer.address, for: allocation) {
            return sendError(error, to: message, origin: origin, key: auth.key)
        }
        // A channel is bound to one peer and a peer to one channel (RFC 8656 §12.2).
        if let bound = allocation.channel(number: number.value, now: now), bound.peer != peer.address {
            return sendError(.badRequest, to: message, origin: origin, key: auth.key)
        }
        if let bound = allocation.channel(peer: peer.address, now: now), bound.number != number.value {
            return sendError(.badRequest, to: message, origin: origin, key: auth.key)
        }
        if !allocation.hasPermission(for: peer.address.ip, now: now)
            && allocation.livePermissionCount(now: now) >= settings.maxPermissionsPerAllocation
        {
            return sendError(.insufficientCapacity, to: message, origin: origin, key: auth.key)
        }
        allocation.bindChannel(number.value, to: peer.address, until: now + Int64(settings.channelLifetime))
        allocation.installPermission(peer.address.ip, until: now + Int64(settings.permissionLifetime))
        watchRelaySockets(of: allocation, drain: true)
        publish(allocation)
        announceChannels(of: allocation, peerIPs: [peer.address.ip], now: now)
        respond(to: message, origin: origin, messageClass: .successResponse, key: auth.key) { w throws(StunEncodeError) in
            try appendSoftware(&w)
        }
    }
}
