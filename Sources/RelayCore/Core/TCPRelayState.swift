import StunCodec

/// What a TCP allocation (RFC 6062) keeps besides an allocation's usual state: its peer
/// connections by CONNECTION-ID, and the Connect requests still waiting for their connects.
/// The shared `TCPConnectionTable` says where each connection is; an id the table no longer
/// lists (its pipe or pending connection ended on whichever thread) is dropped here lazily.
public struct TCPRelayState {
    /// Peer connections by id: connecting, waiting for ConnectionBind, or piped.
    public internal(set) var peers: [PeerConnectionID: TransportAddress] = [:]
    /// Connect requests waiting for their connect to finish, by connection id, with what their
    /// answer needs.
    var pendingConnects: [PeerConnectionID: (request: ReplyTarget, key: IntegrityKey)] = [:]
    /// The bytes its pipes carried, on whichever loop thread they run; ended (final) when the
    /// allocation ends.
    public let piped = PipedTraffic()

    /// Forgets the connections the shared table no longer lists.
    mutating func prune(_ table: TCPConnectionTable) {
        for id in peers.keys where pendingConnects[id] == nil && !table.contains(id) { peers[id] = nil }
    }
}

/// A connect the I/O layer makes for a Connect request (RFC 6062 §5.2): from the allocation's
/// relayed address (`relaySocket`'s bound address) to `peer`. It reports the outcome with
/// `RelayCore.peerConnectFinished`.
public struct PeerConnect: Sendable {
    public let id: PeerConnectionID
    public let relaySocket: RelaySocket
    public let relayed: TransportAddress
    public let peer: TransportAddress
}

/// A ConnectionBind that succeeded (RFC 6062 §5.4): the data connection `origin` now carries the
/// bytes of peer connection `id` both ways, and owns `peerSocket`. Runs after the success
/// response was queued on the connection.
public struct DataConnectionBind: Sendable {
    public let id: PeerConnectionID
    public let origin: ClientOrigin
    public let peerSocket: PeerSocket
    public let peer: TransportAddress
    /// What the pipe charges its bytes to: the allocation's budget and piped-traffic count.
    public let account: PipeAccount
}
