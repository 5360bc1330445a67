import StunCodec

// TCP allocations (RFC 6062): Connect, peer connections arriving at the relayed address, and
// ConnectionBind. The core decides and answers; the I/O layer connects, accepts and pipes
// (docs/tcp-relay.md).
extension RelayCore {
    /// Seconds a connect to a peer may take before Connect gets 447 (RFC 6062 §5.2).
    public static let tcpConnectSeconds: Int64 = 30
    /// Seconds a peer connection waits for its ConnectionBind before it is closed (RFC 6062 §5.2, §5.3).
    public static let tcpBindSeconds: Int64 = 30

    /// Connect (RFC 6062 §5.2): with a permission for the peer's IP and the peer policy's leave,
    /// the I/O layer connects from the relayed address; the answer (CONNECTION-ID, or 447)
    /// follows in `peerConnectFinished`. A peer the allocation is connected or connecting to
    /// gets 446; more than `max-tcp-relay-connections` get 508.
    func handleConnect(_ message: StunMessage, from origin: ClientOrigin, now: Int64) {
        let existing = table[origin.fiveTuple]
        guard let auth = authenticate(message, origin: origin, existing: existing, now: now) else { return }
        let reply = { (error: RelayError) in self.sendError(error, to: message, origin: origin, key: auth.key) }
        guard let allocation = existing else { return reply(.allocationMismatch) }
        guard var state = allocation.tcpRelay else { return reply(.badRequest) }
        guard let peer = try? message.decode(XORPeerAddress.self) else { return reply(.badRequest) }
        if let error = checkPeer(peer.address, for: allocation) { return reply(error) }
        guard allocation.hasPermission(for: peer.address.ip, now: now) else { return reply(.forbidden) }
        state.prune(tables.tcpConnections)
        defer { allocation.tcpRelay = state }
        if state.peers.values.contains(peer.address) { return reply(.connectionAlreadyExists) }
        guard state.peers.count < settings.maxTCPConnectionsPerAllocation else {
            counters.tcpConnections[TCPConnectionOutcome.refused.rawValue] &+= 1
            return reply(.insufficientCapacity)
        }
        let id = tables.tcpConnections.reserve(
            thread: context.loop, relaySocket: allocation.relaySocket, username: allocation.username,
            peer: peer.address, account: PipeAccount(traffic: state.piped, budget: allocation.bandwidth), deadline: now + Self.tcpConnectSeconds + Self.tcpBindSeconds, random: &random)
        state.peers[id] = peer.address
        state.pendingConnects[id] = (ReplyTarget(message), auth.key)
        outbox.emit(
            .connectPeer(
                PeerConnect(
                    id: id, relaySocket: allocation.relaySocket, relayed: allocation.relayedAddress,
                    peer: context.boundForm(of: peer.address))))
    }

    /// The I/O layer's connect for Connect `id` ended. Connected: the success response with
    /// CONNECTION-ID, and true (the I/O layer parks the socket for the ConnectionBind); else 447
    /// and false. False also when the allocation ended meanwhile (the caller closes the socket).
    public func peerConnectFinished(_ id: PeerConnectionID, relaySocket: RelaySocket, connected: Bool, now: Int64) -> Bool {
        assertOwned()
        guard let allocation = table.allocation(onRelaySocket: relaySocket), var state = allocation.tcpRelay,
            let pending = state.pendingConnects.removeValue(forKey: id)
        else {
            tables.tcpConnections.remove(id)
            return false
        }
        if !connected {
            state.peers[id] = nil
            tables.tcpConnections.remove(id)
        }
        allocation.tcpRelay = state
        let outcome: TCPConnectionOutcome = connected ? .connected : .failed
        counters.tcpConnections[outcome.rawValue] &+= 1
        guard connected else {
            sendError(.connectionTimeoutOrFailure, to: pending.request, origin: allocation.origin, key: pending.key)
            return false
        }
        respond(to: pending.request, origin: allocation.origin, messageClass: .successResponse, key: pending.key) {
            w throws(StunEncodeError) in
            try w.append(ConnectionID(value: id.value))
            try appendSoftware(&w)
        }
        return true
    }

    /// A peer connected to the relayed address of a TCP allocation (RFC 6062 §5.3). With a
    /// permission for its IP and the peer policy's leave, the client gets a ConnectionAttempt
    /// indication and the id is returned (the I/O layer parks the socket under it for the
    /// ConnectionBind); nil: the I/O layer closes the connection (counted).
    public func peerConnectionArrived(on relaySocket: RelaySocket, from peer: TransportAddress, now: Int64) -> PeerConnectionID? {
        assertOwned()
        guard let allocation = table.allocation(onRelaySocket: relaySocket), var state = allocation.tcpRelay, allocation.expiry > now else {
            counters.tcpConnections[TCPConnectionOutcome.refused.rawValue] &+= 1
            return nil
        }
        // Another allocation of this server is seen in the form its clients know.
        let seen = context.advertisedForm(of: peer) ?? peer
        guard peerAllowed(seen, tcp: true), allocation.hasPermission(for: seen.ip, now: now) else {
            counters.drop(.noPermission)
            counters.tcpConnections[TCPConnectionOutcome.refused.rawValue] &+= 1
            return nil
        }
        state.prune(tables.tcpConnections)
        defer { allocation.tcpRelay = state }
        guard state.peers.count < settings.maxTCPConnectionsPerAllocation else {
            counters.tcpConnections[TCPConnectionOutcome.refused.rawValue] &+= 1
            return nil
        }
        let id = tables.tcpConnections.reserve(
            thread: context.loop, relaySocket: relaySocket, username: allocation.username, peer: seen,
            account: PipeAccount(traffic: state.piped, budget: allocation.bandwidth), deadline: now + Self.tcpBindSeconds, random: &random)
        state.peers[id] = seen
        counters.tcpConnections[TCPConnectionOutcome.accepted.rawValue] &+= 1
        sendConnectionAttempt(id: id, peer: seen, to: allocation.origin)
        return id
    }

    /// ConnectionAttempt indication (RFC 6062 §5.3, §6.1): XOR-PEER-ADDRESS and CONNECTION-ID.
    private func sendConnectionAttempt(id: PeerConnectionID, peer: TransportAddress, to origin: ClientOrigin) {
        guard outbox.hasRoomForResponse else { return counters.drop(.outboxFull) }
        let buffer = outbox.scratch()
        let transactionID = TransactionID(high: UInt32(truncatingIfNeeded: random.next()), low: random.next())
        do {
            var w = try StunMessageWriter(
                into: buffer, type: MessageType(method: .connectionAttempt, messageClass: .indication),
                transactionID: transactionID)
            try w.append(XORPeerAddress(address: peer))
            try w.append(ConnectionID(value: id.value))
            if settings.fingerprint { try w.appendFingerprint() }
            outbox.commitScratch(length: w.count, route: .client(origin))
        } catch {
            counters.drop(.outboxFull)
        }
    }

    /// ConnectionBind (RFC 6062 §5.4), on a new TCP or TLS connection without an allocation:
    /// authenticated as the allocation's user (else 441), it claims the ready peer connection
    /// CONNECTION-ID names (else 400), and the connection becomes a pipe to it once the success
    /// response is written.
    func handleConnectionBind(_ message: StunMessage, from origin: ClientOrigin, now: Int64) {
        guard origin.fiveTuple.transport.isStream else {
            return sendError(.badRequest, to: message, origin: origin, key: nil)
        }
        let existing = table[origin.fiveTuple]
        guard let auth = authenticate(message, origin: origin, existing: existing, now: now) else { return }
        let reply = { (error: RelayError) in self.sendError(error, to: message, origin: origin, key: auth.key) }
        guard existing == nil, let id = try? message.decode(ConnectionID.self) else { return reply(.badRequest) }
        switch tables.tcpConnections.claim(PeerConnectionID(id.value), username: auth.username, thread: context.loop) {
        case .unknown:
            reply(.badRequest)
        case .wrongUser:
            reply(.wrongCredentials)
        case .peer(let socket, let entry):
            counters.tcpConnections[TCPConnectionOutcome.bound.rawValue] &+= 1
            respond(to: message, origin: origin, messageClass: .successResponse, key: auth.key) {
                w throws(StunEncodeError) in
                try appendSoftware(&w)
            }
            outbox.emit(
                .bindDataConnection(
                    DataConnectionBind(
                        id: PeerConnectionID(id.value), origin: origin, peerSocket: socket, peer: entry.peer, account: entry.account)))
        }
    }
}

/// What became of the peer connections of TCP allocations (RFC 6062), counted per outcome.
public enum TCPConnectionOutcome: Int, CaseIterable, Sendable {
    /// A Connect's connect to the peer succeeded.
    case connected
    /// A Connect's connect to the peer failed or timed out (447).
    case failed
    /// A peer connected in and the client was sent a ConnectionAttempt.
    case accepted
    /// A peer connection refused: no permission, the peer policy, the per-allocation limit.
    case refused
    /// A ConnectionBind joined a data connection with a peer connection.
    case bound
    /// No ConnectionBind within 30 s: the peer connection was closed.
    case expired

    public var label: String {
        switch self {
        case .connected: return "connected"
        case .failed: return "failed"
        case .accepted: return "accepted"
        case .refused: return "refused"
        case .bound: return "bound"
        case .expired: return "expired"
        }
    }
}
