import StunCodec

/// A UDP allocation whose relay sockets are open already: one another relayd process made and
/// handed over, with its sockets, or one restored from a snapshot. `RelayCore.adopt` serves it
/// on as if this core had made it (docs/architecture.md, "Relay sockets"). Times are seconds
/// left, so the value means the same under another process's clock.
public struct AdoptedAllocation: Sendable {
    /// One relayed transport address (RFC 8656 §7.2): the address its socket is bound to, the
    /// open socket, and the seconds its lifetime has left.
    public struct Relay: Sendable {
        public var bound: TransportAddress
        public var socket: RelaySocket
        public var secondsLeft: Int64

        public init(bound: TransportAddress, socket: RelaySocket, secondsLeft: Int64) {
            self.bound = bound
            self.socket = socket
            self.secondsLeft = secondsLeft
        }
    }

    public var origin: ClientOrigin
    /// The first relayed address, and a dual allocation's second one (RFC 8656 §7.2 step 9).
    public var main: Relay
    public var additional: Relay?
    public var username: String
    /// The user id quotas count (docs/auth.md).
    public var user: String
    /// The long-term key its requests are checked with (RFC 8489 §9.2.2).
    public var key: [UInt8]
    public var credentials: CredentialAlgorithms
    /// The Allocate it answered, and that answer, for a retransmission (RFC 8656 §7.2).
    public var transactionID: TransactionID
    public var allocateResponse: [UInt8]
    /// Permissions by peer IP and channels (RFC 8656 §9, §12), with the seconds each has left.
    public var permissions: [(peer: IPAddress, secondsLeft: Int64)]
    public var channels: [(number: UInt16, peer: TransportAddress, secondsLeft: Int64)]
    /// DONT-FRAGMENT (RFC 8656 §18.9): the I/O layer set it on the sockets already.
    public var dontFragment: Bool
    /// The `max-bps` its lease holds (0: none).
    public var bytesPerSecond: Int
    /// The session id its log lines carry; a mobile allocation's moves so far (RFC 8016).
    public var sessionID: UInt64
    public var mobile: Bool
    public var moves: UInt32
    /// A TCP allocation's peer connections and pipes' account (RFC 6062); nil for a UDP one.
    public var tcpRelay: AdoptedTCPRelay?

    public init(
        origin: ClientOrigin, main: Relay, additional: Relay? = nil, username: String, user: String, key: [UInt8],
        credentials: CredentialAlgorithms = CredentialAlgorithms(), transactionID: TransactionID,
        allocateResponse: [UInt8] = [], permissions: [(peer: IPAddress, secondsLeft: Int64)] = [],
        channels: [(number: UInt16, peer: TransportAddress, secondsLeft: Int64)] = [], dontFragment: Bool = false,
        bytesPerSecond: Int = 0, sessionID: UInt64, mobile: Bool = false, moves: UInt32 = 0,
        tcpRelay: AdoptedTCPRelay? = nil
    ) {
        self.origin = origin
        self.main = main
        self.additional = additional
        self.username = username
        self.user = user
        self.key = key
        self.credentials = credentials
        self.transactionID = transactionID
        self.allocateResponse = allocateResponse
        self.permissions = permissions
        self.channels = channels
        self.dontFragment = dontFragment
        self.bytesPerSecond = bytesPerSecond
        self.sessionID = sessionID
        self.mobile = mobile
        self.moves = moves
        self.tcpRelay = tcpRelay
    }
}

/// Why `RelayCore.adopt` turned an allocation down; the caller closes its sockets.
public enum AdoptionRefusal: Error, Sendable, Equatable {
    /// A DTLS client: only UDP allocations, and TCP and TLS ones whose connection was handed
    /// over with them, are adopted (a DTLS session cannot move).
    case transportCannotMove
    /// Its 5-tuple has an allocation already.
    case fiveTupleInUse
    /// A relayed address outside this node's relay addresses and port range, or whose port
    /// another allocation holds.
    case portUnavailable(TransportAddress)
    /// Its lifetime ran out.
    case expired
}
