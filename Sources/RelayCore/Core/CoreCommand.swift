import StunCodec

/// An effect the core asks of the I/O layer besides sending a packet (those are `OutboundPacket`s
/// in the same outbox). The core only describes it; the I/O layer executes the outbox's commands
/// in order when it flushes, after the packets (docs/architecture.md, "The command flow").
public enum CoreCommand {
    /// Open a relay socket for a granted Allocate (RFC 8656 §7.2): bind a UDP socket (or listen
    /// on a TCP one, RFC 6062 §5.1) to the address, register it for reading, and answer with
    /// `RelayCore.relaySocketOpened` once this flush is done.
    case openRelaySocket(RelaySocketOpen)
    /// The allocation that owned this relay socket has ended: stop reading it, and close it once
    /// the packets already queued for it have left.
    case closeRelaySocket(RelaySocket)
    /// The allocation of this relay socket asked for DONT-FRAGMENT (RFC 8656 §7.2, §18.9): what the
    /// socket sends must not be fragmented (DF set for IPv4); a datagram over the path MTU is
    /// dropped and counted instead.
    case setDontFragment(RelaySocket)
    /// Start reading this UDP relay socket: its allocation has its first permission. Until then
    /// every peer packet would be dropped (RFC 8656 §9), so an idle allocation's socket is not
    /// polled and may queue only the kernel's minimum (docs/benchmark.md, "Node capacity").
    /// `drain`: drop what it queued before, unread, as the permission check would have.
    case watchRelaySocket(RelaySocket, drain: Bool)
    /// A packet framed for a TCP/TLS client of another loop thread (the relay-to-relay
    /// short-circuit, docs/architecture.md): the I/O layer queues it on that client's connection,
    /// and calls `RelayCore.streamDeliveryRefused` if the connection will not take it.
    case deliverToStream(StreamDelivery)
    /// A channel whose ChannelData may be relayed without the core, in both directions, until
    /// `route.expiry` (the kernel fast path). Sent again when an expiry moves.
    case installChannel(ChannelRoute)
    /// A channel that must no longer be relayed without the core: it, its permission or its
    /// allocation ended.
    case removeChannel(ChannelRoute)
    /// An allocation started, was refreshed, moved or ended: for whatever observes sessions
    /// (the log, metrics; the core logs nothing itself).
    case session(SessionEvent)
    /// A Refresh with a mobility ticket for an allocation another loop thread holds (RFC 8016,
    /// docs/mobility.md): the I/O layer hands it to that thread, which calls
    /// `RelayCore.handleForwardedRequest`.
    case forwardRequest(ForwardedRequest)
    /// The client of mobile allocation `session` moved from `from` to `to` (`to` nil: the
    /// allocation ended): the I/O layer makes this thread receive the UDP datagrams of `to` (a
    /// connected socket in the listeners' SO_REUSEPORT group), stops doing so for `from`, and
    /// logs a move as `allocation_moved`.
    case steerClient(session: String, from: FiveTuple, to: FiveTuple?)
    /// A Connect of a TCP allocation (RFC 6062 §5.2): the I/O layer connects from the relayed
    /// address to the peer and reports with `RelayCore.peerConnectFinished`.
    case connectPeer(PeerConnect)
    /// A ConnectionBind succeeded (RFC 6062 §5.4): the data connection becomes a pipe to the
    /// peer connection (docs/tcp-relay.md).
    case bindDataConnection(DataConnectionBind)
    /// An Allocate names a user the user database's view does not have: look it up off the
    /// loop and answer with `RelayCore.userLookedUp` (docs/userdb.md).
    case lookUpUser(UserLookup)
}

/// A client's request handed from the loop thread that received it to the one that holds the
/// allocation it names.
public struct ForwardedRequest: Sendable {
    public let thread: LoopIndex
    public let bytes: [UInt8]
    public let origin: ClientOrigin
}

/// A packet for a stream client of another loop thread. `bytes` lives in the outbox's arena until
/// the flush; `target` and `payloadCount` let the core take back the delivery's accounting
/// when the connection refuses it.
public struct StreamDelivery {
    public let sink: any StreamSink
    public let bytes: UnsafeRawBufferPointer
    /// The target allocation's relayed address (bound form).
    public let target: TransportAddress
    public let payloadCount: Int
}

/// Everything a data plane outside the core needs to relay one UDP client's channel exactly as
/// the core would (RFC 8656 §12): ChannelData `number` from `client` to `server` goes out of
/// `relaySocket` (bound to `relayed`) to `peer`, and UDP from `peer` to `relayed` comes back to
/// the client as ChannelData on `number`. Valid until `expiry` (monotonic seconds): the earliest
/// of the channel's, the permission's and the allocation's expiry.
public struct ChannelRoute: Hashable, Sendable {
    public var client: TransportAddress
    public var server: TransportAddress
    public var clientSocket: ClientSocket
    public var number: UInt16
    public var peer: TransportAddress
    public var relayed: TransportAddress
    public var relaySocket: RelaySocket
    public var expiry: Int64
    /// The peer is one of relayd's own relayed addresses (a relay address at a relay port): a data
    /// plane outside the core relays to it only straight into that allocation's channel, and
    /// leaves everything else to the core, which checks the allocation lives (docs/peer-policy.md).
    public var peerIsRelayed: Bool

    public init(
        client: TransportAddress, server: TransportAddress, clientSocket: ClientSocket, number: UInt16,
        peer: TransportAddress, relayed: TransportAddress, relaySocket: RelaySocket, expiry: Int64,
        peerIsRelayed: Bool = false
    ) {
        self.peerIsRelayed = peerIsRelayed
        self.client = client
        self.server = server
        self.clientSocket = clientSocket
        self.number = number
        self.peer = peer
        self.relayed = relayed
        self.relaySocket = relaySocket
        self.expiry = expiry
    }
}
