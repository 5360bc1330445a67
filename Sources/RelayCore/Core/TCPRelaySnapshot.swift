import StunCodec

/// A TCP allocation's own state (RFC 6062) as a live upgrade hands it to another process
/// (docs/live-upgrade.md, "RFC 6062 connections"): what its pipes carried so far, and each of its
/// peer connections with where it stands. The sockets go apart, as descriptors; the allocation's
/// usual state goes in the snapshot like any other's.
public struct TCPRelaySnapshot: Sendable, Equatable {
    /// A Connect whose connect is still in progress (RFC 6062 §5.2): what its answer needs.
    public struct Connect: Sendable, Equatable {
        public var method: UInt16
        public var transactionID: TransactionID
        public var fingerprinted: Bool
        public var key: IntegrityKey

        public init(method: UInt16, transactionID: TransactionID, fingerprinted: Bool, key: IntegrityKey) {
            self.method = method
            self.transactionID = transactionID
            self.fingerprinted = fingerprinted
            self.key = key
        }
    }

    /// Where a peer connection stands (`TCPConnectionTable.State`).
    public enum State: Sendable, Equatable {
        /// The connect for a Connect is in progress; its Connect waits for the answer, unless it
        /// was answered already.
        case connecting(Connect?)
        /// Connected, waiting for the client's ConnectionBind (RFC 6062 §5.3).
        case ready
        /// A data connection on loop `loop` pipes it (RFC 6062 §5.5).
        case piped(loop: UInt16)
    }

    public struct Connection: Sendable, Equatable {
        public var id: PeerConnectionID
        public var peer: TransportAddress
        /// Monotonic seconds by which a connecting or ready connection must move on.
        public var deadline: Int64
        public var state: State

        public init(id: PeerConnectionID, peer: TransportAddress, deadline: Int64, state: State) {
            self.id = id
            self.peer = peer
            self.deadline = deadline
            self.state = state
        }
    }

    /// The allocation's `JournalAllocation.sessionID`.
    public var session: UInt64
    /// The bytes its pipes carried so far, each way.
    public var bytesToPeer: UInt64
    public var bytesToClient: UInt64
    public var connections: [Connection]

    /// The most connections a snapshot carries: an allocation with more stays with its
    /// process (it drains there), so one handover message carries one allocation.
    public static let maxConnections = 512

    public init(session: UInt64, bytesToPeer: UInt64, bytesToClient: UInt64, connections: [Connection]) {
        self.session = session
        self.bytesToPeer = bytesToPeer
        self.bytesToClient = bytesToClient
        self.connections = connections
    }

    /// The ids of the connections piped on some loop.
    public var pipedIDs: [PeerConnectionID] {
        connections.compactMap { if case .piped = $0.state { return $0.id } else { return nil } }
    }
}

/// A TCP allocation another process hands over, as `RelayCore.adopt` takes it: its snapshot
/// with only the connections whose sockets arrived, the sockets of those ready for a
/// ConnectionBind, and the account its pipes on every loop charge (made once for all of them,
/// before any loop starts).
public struct AdoptedTCPRelay: Sendable {
    public var snapshot: TCPRelaySnapshot
    public var readySockets: [PeerConnectionID: PeerSocket]
    public var account: PipeAccount

    public init(snapshot: TCPRelaySnapshot, readySockets: [PeerConnectionID: PeerSocket], account: PipeAccount) {
        self.snapshot = snapshot
        self.readySockets = readySockets
        self.account = account
    }
}
