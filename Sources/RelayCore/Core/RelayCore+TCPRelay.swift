import StunCodec

// TCP allocations (RFC 6062): Connect, peer connections arriving at the relayed address, and
// ConnectionBind. `TCPRelayState` decides; this glue authenticates, reserves ids in the shared
// `TCPConnectionTable`, answers, counts and emits the commands. The I/O layer connects, accepts
// and pipes (docs/tcp-relay.md).
extension RelayCore {
    /// Seconds a connect to a peer may take before Connect gets 447 (RFC 6062 §5.2).
    public static let tcpConnectSeconds = TCPRelayState.connectSeconds
    /// Seconds a peer connection waits for its ConnectionBind before it is closed (RFC 6062 §5.2, §5.3).
    public static let tcpBindSeconds = TCPRelayState.bindSeconds

    /// Connect (RFC 6062 §5.2): with a permission for the peer's IP and the peer policy's leave,
    /// and when `TCPRelayState.connect` allows it (else 446 or 508), the I/O layer connects from
    /// the relayed address; the answer (CONNECTION-ID, or 447) follows in `peerConnectFinished`.
    func handleConnect(_ message: StunMessage, from origin: ClientOrigin, now: Int64) {
        let existing = table[origin.fiveTuple]
        guard let auth = authenticate(message, origin: origin, existing: existing, now: now) else { return }
        let reply = { (error: RelayError) in self.sendError(error, to: message, origin: origin, key: auth.key) }
        guard let allocation = existing else { return reply(.allocationMismatch) }
        guard var state = allocation.tcpRelay else { return reply(.badRequest) }
        guard let peer = try? message.decode(XORPeerAddress.self) else { return reply(.badRequest) }
        if let error = checkPeer(peer.address, for: allocation) { return reply(error) }
        guard allocation.hasPermission(for: peer.address.ip, now: now) else { return reply(.forbidden) }
        defer { allocation.tcpRelay = state }
        let connections = tables.tcpConnections
        let decision = state.connect(
            to: peer.address, limit: settings.maxTCPConnectionsPerAllocation, now: now,
            isListed: { connections.contains($0) })
        switch decision {
        case .refuse(let refusal):
            if let outcome = refusal.counted { counters.tcpConnections[outcome.rawValue] &+= 1 }
            reply(refusal.error)
        case .reserve(let deadline):
            let id = connections.reserve(
                thread: context.loop, relaySocket: allocation.relaySocket, username: bindIdentity(of: allocation),
                peer: peer.address, account: state.account(budget: allocation.bandwidth), deadline: deadline,
                random: &random)
            state.connecting(id, to: peer.address, answer: PendingConnect(request: ReplyTarget(message), key: auth.key))
            outbox.emit(
                .connectPeer(
                    PeerConnect(
                        id: id, relaySocket: allocation.relaySocket, relayed: allocation.relayedAddress,
                        peer: context.boundForm(of: peer.address))))
        }
    }

    /// The I/O layer's connect for Connect `id` ended. Connected: the success response with
    /// CONNECTION-ID, and true (the I/O layer parks the socket for the ConnectionBind); else 447
    /// and false. False also when the allocation ended meanwhile (the caller closes the socket).
    public func peerConnectFinished(_ id: PeerConnectionID, relaySocket: RelaySocket, connected: Bool, now: Int64)
        -> Bool
    {
        assertOwned()
        guard let allocation = table.allocation(onRelaySocket: relaySocket), var state = allocation.tcpRelay,
            let answer = state.connectFinished(id, connected: connected)
        else {
            tables.tcpConnections.remove(id)
            return false
        }
        allocation.tcpRelay = state
        switch answer {
        case .failed(let pending):
            tables.tcpConnections.remove(id)
            counters.tcpConnections[answer.outcome.rawValue] &+= 1
            sendError(.connectionTimeoutOrFailure, to: pending.request, origin: allocation.origin, key: pending.key)
            return false
        case .connected(let id, let pending):
            counters.tcpConnections[answer.outcome.rawValue] &+= 1
            respond(to: pending.request, origin: allocation.origin, messageClass: .successResponse, key: pending.key) {
                w throws(StunEncodeError) in
                try w.append(ConnectionID(value: id.value))
                try appendSoftware(&w)
            }
            return true
        }
    }

    /// A peer connected to the relayed address of a TCP allocation (RFC 6062 §5.3). With a
    /// permission for its IP, the peer policy's leave and room (`TCPRelayState.accept`), the
    /// client gets a ConnectionAttempt indication and the id is returned (the I/O layer parks the
    /// socket under it for the ConnectionBind); nil: the I/O layer closes the connection (counted).
    public func peerConnectionArrived(on relaySocket: RelaySocket, from peer: TransportAddress, now: Int64)
        -> PeerConnectionID?
    {
        assertOwned()
        guard let allocation = table.allocation(onRelaySocket: relaySocket), var state = allocation.tcpRelay,
            allocation.expiry > now
        else {
            counters.tcpConnections[TCPConnectionOutcome.refused.rawValue] &+= 1
            return nil
        }
        // Another allocation of this server is seen in the form its clients know.
        let seen = context.advertisedForm(of: peer) ?? peer
        guard peerAllowed(seen, tcp: true, tenant: allocation.tenant), allocation.hasPermission(for: seen.ip, now: now) else {
            counters.drop(.noPermission)
            counters.tcpConnections[TCPConnectionOutcome.refused.rawValue] &+= 1
            return nil
        }
        defer { allocation.tcpRelay = state }
        let connections = tables.tcpConnections
        let decision = state.accept(
            limit: settings.maxTCPConnectionsPerAllocation, now: now, isListed: { connections.contains($0) })
        switch decision {
        case .refuse(let refusal):
            if let outcome = refusal.counted { counters.tcpConnections[outcome.rawValue] &+= 1 }
            return nil
        case .reserve(let deadline):
            let id = connections.reserve(
                thread: context.loop, relaySocket: relaySocket, username: bindIdentity(of: allocation), peer: seen,
                account: state.account(budget: allocation.bandwidth), deadline: deadline, random: &random)
            state.accepted(id, from: seen)
            counters.tcpConnections[TCPConnectionOutcome.accepted.rawValue] &+= 1
            sendConnectionAttempt(id: id, peer: seen, to: allocation.origin)
            return id
        }
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
    /// authenticated as the allocation's user, it claims the ready peer connection CONNECTION-ID
    /// names (answered as `TCPRelayState.connectionBind` says), and the connection becomes a
    /// pipe to it once the success response is written.
    func handleConnectionBind(_ message: StunMessage, from origin: ClientOrigin, now: Int64) {
        guard origin.fiveTuple.transport.isStream else {
            return sendError(.badRequest, to: message, origin: origin, key: nil)
        }
        let existing = table[origin.fiveTuple]
        guard let auth = authenticate(message, origin: origin, existing: existing, now: now) else { return }
        guard existing == nil, let id = try? message.decode(ConnectionID.self) else {
            return sendError(.badRequest, to: message, origin: origin, key: auth.key)
        }
        let claim = tables.tcpConnections.claim(
            PeerConnectionID(id.value), username: bindIdentity(username: auth.username, tenant: auth.tenant),
            thread: context.loop)
        switch TCPRelayState.connectionBind(claim) {
        case .refuse(let error):
            sendError(error, to: message, origin: origin, key: auth.key)
        case .bind(let socket, let entry):
            counters.tcpConnections[TCPConnectionOutcome.bound.rawValue] &+= 1
            respond(to: message, origin: origin, messageClass: .successResponse, key: auth.key) {
                w throws(StunEncodeError) in
                try appendSoftware(&w)
            }
            outbox.emit(
                .bindDataConnection(
                    DataConnectionBind(
                        id: PeerConnectionID(id.value), origin: origin, peerSocket: socket, peer: entry.peer,
                        account: entry.account)))
        }
    }
}
