import StunCodec

/// A TCP allocation's own state and decisions (RFC 6062), besides an allocation's usual state:
/// its peer connections by CONNECTION-ID, the Connect requests still waiting for their connects,
/// and the bytes its pipes carried.
///
/// Its methods decide and return what to do (`TCPPeerDecision`, `ConnectAnswer`,
/// `ConnectionBindAnswer`): the per-allocation limit, a second connection to one peer, which
/// Connect a finished connect answers and how. `RelayCore+TCPRelay.swift` carries them out: it
/// authenticates, reserves ids in the node's shared `TCPConnectionTable`, answers, counts and
/// emits the commands. That table says where each connection is; an id it no longer lists (its
/// pipe or pending connection ended on whichever thread) is dropped here lazily (`prune`).
public struct TCPRelayState {
    /// Seconds a connect to a peer may take before Connect gets 447 (RFC 6062 §5.2).
    public static let connectSeconds: Int64 = 30
    /// Seconds a peer connection waits for its ConnectionBind before it is closed (RFC 6062 §5.2, §5.3).
    public static let bindSeconds: Int64 = 30

    /// Peer connections by id: connecting, waiting for ConnectionBind, or piped.
    public internal(set) var peers: [PeerConnectionID: TransportAddress] = [:]
    /// Connect requests waiting for their connect to finish, by connection id, with what their
    /// answer needs.
    private(set) var pendingConnects: [PeerConnectionID: PendingConnect] = [:]
    /// The bytes its pipes carried, on whichever loop thread they run; ended (final) when the
    /// allocation ends.
    public let piped: PipedTraffic

    init(piped: PipedTraffic = PipedTraffic()) { self.piped = piped }

    /// A Connect for `peer` that authenticated, has a permission and the peer policy's leave
    /// (RFC 6062 §5.2), once the connections `isListed` no longer lists are forgotten: a peer the
    /// allocation is connected or connecting to already is refused (446); at `limit`
    /// connections, pending and piped together (`max-tcp-relay-connections`), so is any other
    /// (508). Else an id is reserved until the connect's and the ConnectionBind's time is up,
    /// and recorded with `connecting`.
    mutating func connect(
        to peer: TransportAddress, limit: Int, now: Int64, isListed: (PeerConnectionID) -> Bool
    ) -> TCPPeerDecision {
        prune(isListed)
        if peers.values.contains(peer) { return .refuse(.duplicate) }
        guard peers.count < limit else { return .refuse(.overLimit) }
        return .reserve(deadline: now + Self.connectSeconds + Self.bindSeconds)
    }

    /// Records Connect's connection `id` to `peer`, whose connect started; `answer` is what its
    /// answer needs when the connect finishes (`connectFinished`).
    mutating func connecting(_ id: PeerConnectionID, to peer: TransportAddress, answer: PendingConnect) {
        peers[id] = peer
        pendingConnects[id] = answer
    }

    /// The connect of `id` finished (RFC 6062 §5.2): the Connect it answers, once; nil when no
    /// Connect waits for it (answered already, or not this allocation's). A failed connect is
    /// forgotten, so the peer can be connected again.
    mutating func connectFinished(_ id: PeerConnectionID, connected: Bool) -> ConnectAnswer? {
        guard let pending = pendingConnects.removeValue(forKey: id) else { return nil }
        guard connected else {
            peers[id] = nil
            return .failed(pending)
        }
        return .connected(id, pending)
    }

    /// A peer connecting in with a permission and the peer policy's leave (RFC 6062 §5.3), once
    /// the connections `isListed` no longer lists are forgotten: refused at `limit` connections;
    /// else an id is reserved until the ConnectionBind's time is up, and recorded with `accepted`.
    mutating func accept(limit: Int, now: Int64, isListed: (PeerConnectionID) -> Bool) -> TCPPeerDecision {
        prune(isListed)
        guard peers.count < limit else { return .refuse(.overLimit) }
        return .reserve(deadline: now + Self.bindSeconds)
    }

    /// Records the accepted connection `id` from `peer`; the client is told with a
    /// ConnectionAttempt (RFC 6062 §5.3).
    mutating func accepted(_ id: PeerConnectionID, from peer: TransportAddress) {
        peers[id] = peer
    }

    /// What a ConnectionBind's claim on the shared table is answered with (RFC 6062 §5.4): the
    /// peer socket to pipe to; 441 for another user's connection; 400 for an id that is unknown,
    /// not connected yet, or bound already.
    static func connectionBind(_ claim: TCPConnectionTable.Claim) -> ConnectionBindAnswer {
        switch claim {
        case .peer(let socket, let entry): return .bind(socket, entry)
        case .wrongUser: return .refuse(.wrongCredentials)
        case .unknown: return .refuse(.badRequest)
        }
    }

    /// What a pipe of this allocation charges its bytes to: `budget` (`max-bps`) and `piped`.
    func account(budget: BandwidthBudget?) -> PipeAccount { PipeAccount(traffic: piped, budget: budget) }

    /// Takes over connection `id` to `peer` from a process that handed it over (a live upgrade),
    /// with the Connect that still waits for its connect, if any.
    mutating func adopted(_ id: PeerConnectionID, peer: TransportAddress, waiting: PendingConnect?) {
        peers[id] = peer
        if let waiting { pendingConnects[id] = waiting }
    }

    /// The Connect waiting for connection `id`'s connect, if any.
    func pendingConnect(_ id: PeerConnectionID) -> PendingConnect? { pendingConnects[id] }

    /// Forgets the connections the shared table no longer lists (`isListed`), except those
    /// whose Connect still waits for its connect.
    mutating func prune(_ isListed: (PeerConnectionID) -> Bool) {
        for id in peers.keys where pendingConnects[id] == nil && !isListed(id) { peers[id] = nil }
    }
}
