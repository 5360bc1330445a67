import StunCodec

// What `TCPRelayState` decides (RFC 6062), for `RelayCore+TCPRelay.swift` to carry out.

/// A Connect waiting for its connect (RFC 6062 §5.2): what its answer needs.
struct PendingConnect {
    var request: ReplyTarget
    var key: IntegrityKey
}

/// What becomes of a new peer connection of a TCP allocation: a Connect's (RFC 6062 §5.2) or a
/// peer's connecting in (§5.3).
enum TCPPeerDecision: Equatable {
    /// Reserve an id in the shared `TCPConnectionTable`, good until `deadline`, then record it
    /// (`TCPRelayState.connecting`, `accepted`).
    case reserve(deadline: Int64)
    /// Refused: a Connect is answered `error`; a peer connecting in is closed.
    case refuse(TCPPeerRefusal)
}

/// Why a new peer connection is refused.
enum TCPPeerRefusal: Equatable {
    /// The allocation is connected or connecting to the peer already (Connect only).
    case duplicate
    /// The allocation has `max-tcp-relay-connections` connections, pending and piped together.
    case overLimit

    /// A Connect's answer: 446 Connection Already Exists, 508 Insufficient Capacity (RFC 6062
    /// §5.2, §6.3).
    var error: RelayError {
        switch self {
        case .duplicate: return .connectionAlreadyExists
        case .overLimit: return .insufficientCapacity
        }
    }

    /// The outcome it counts as, if any (`relayd_tcp_peer_connections_total`).
    var counted: TCPConnectionOutcome? {
        switch self {
        case .duplicate: return nil
        case .overLimit: return .refused
        }
    }
}

/// A finished connect's answer to its Connect (RFC 6062 §5.2).
enum ConnectAnswer {
    /// Success with CONNECTION-ID `id`; the peer connection waits for its ConnectionBind.
    case connected(PeerConnectionID, PendingConnect)
    /// 447 Connection Timeout or Failure; the connection is forgotten (here and in the shared
    /// table).
    case failed(PendingConnect)

    var outcome: TCPConnectionOutcome {
        switch self {
        case .connected: return .connected
        case .failed: return .failed
        }
    }
}

/// A ConnectionBind's answer (RFC 6062 §5.4).
enum ConnectionBindAnswer: Equatable {
    /// Success: the data connection becomes a pipe to this peer socket.
    case bind(PeerSocket, TCPConnectionTable.Entry)
    case refuse(RelayError)
}
