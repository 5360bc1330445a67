import StunCodec

/// A connect the I/O layer makes for a Connect request (RFC 6062 §5.2): from the allocation's
/// relayed address (`relaySocket`'s bound address) to `peer`. It reports the outcome with
/// `RelayCore.peerConnectFinished`.
public struct PeerConnect: Sendable {
    public let id: PeerConnectionID
    public let relaySocket: RelaySocket
    public let relayed: TransportAddress
    public let peer: TransportAddress

    public init(id: PeerConnectionID, relaySocket: RelaySocket, relayed: TransportAddress, peer: TransportAddress) {
        self.id = id
        self.relaySocket = relaySocket
        self.relayed = relayed
        self.peer = peer
    }
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
