import StunCodec

extension RelayCore {
    /// CreatePermission (RFC 8656 §10): one or more XOR-PEER-ADDRESS, installed all or none.
    func handleCreatePermission(_ message: StunMessage, from origin: ClientOrigin, now: Int64) {
        let existing = table[origin.fiveTuple]
        guard let auth = authenticate(message, origin: origin, existing: existing, now: now) else { return }
        guard let allocation = existing else {
            return sendError(.allocationMismatch, to: message, origin: origin, key: auth.key)
        }
        var peers: [IPAddress] = []
        var it = message.attributes
        while let attribute = it.next() {
            guard attribute.type == .xorPeerAddress else { continue }
            guard let peer = try? XORPeerAddress(decoding: attribute.value, transactionID: message.transactionID) else {
                return sendError(.badRequest, to: message, origin: origin, key: auth.key)
            }
            if let error = checkPeer(peer.address, for: allocation) {
                return sendError(error, to: message, origin: origin, key: auth.key)
            }
            if !peers.contains(peer.address.ip) { peers.append(peer.address.ip) }
        }
        guard !peers.isEmpty else { return sendError(.badRequest, to: message, origin: origin, key: auth.key) }
        let newOnes = peers.filter { !allocation.hasPermission(for: $0, now: now) }.count
        if allocation.livePermissionCount(now: now) + newOnes > settings.maxPermissionsPerAllocation {
            return sendError(.insufficientCapacity, to: message, origin: origin, key: auth.key)
        }
        allocation.sweep(now: now)
        for peer in peers { allocation.installPermission(peer, until: now + Int64(settings.permissionLifetime)) }
        watchRelaySockets(of: allocation, drain: true)
        publish(allocation)
        announceChannels(of: allocation, peerIPs: peers, now: now)
        respond(to: message, origin: origin, messageClass: .successResponse, key: auth.key) { w throws(StunEncodeError) in
            try appendSoftware(&w)
        }
    }

    /// The address family must be that of a relayed address of the allocation (RFC 8656 §10.2,
    /// §12.2: 443; either family in a dual allocation) and the peer policy must allow it (403):
    /// one of relayd's own relayed addresses only while a live allocation of the allocation's
    /// transport holds it.
    func checkPeer(_ peer: TransportAddress, for allocation: Allocation) -> RelayError? {
        if !allocation.serves(peer.ip.family) { return .peerAddressFamilyMismatch }
        if !peerAllowed(peer, tcp: allocation.tcpRelay != nil, tenant: allocation.tenant) { return .forbidden }
        return nil
    }
}
