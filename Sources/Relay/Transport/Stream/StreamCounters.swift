import RelayCore

/// Why a TCP/TLS connection ended; each reason is counted.
public enum StreamCloseReason: Int, CaseIterable, Sendable {
    /// The client closed its side (after its pending answers were written, within a bound).
    case clientClosed
    /// A socket or TLS error after the handshake.
    case error
    /// Bytes that cannot start a STUN message or ChannelData frame (RFC 8489 §6.2.2, RFC 8656 §12.5).
    case badFrame
    case tlsHandshakeFailed
    /// No TLS handshake within `tls-handshake-timeout`.
    case tlsHandshakeTimeout
    /// No valid STUN message within `tcp-idle-timeout`, or idle that long without an allocation.
    case idleTimeout
    /// A client that does not read: its pending output passed the per-connection bound.
    case slowReader
    case shutdown
    /// A data connection's peer connection failed (RFC 6062 §5.5).
    case peerClosed
    /// A data connection's TCP allocation ended (RFC 6062 §5.5).
    case relayEnded
    /// Nothing within `tls-handshake-timeout` that says what the connection speaks (a shared
    /// port) or whose it is (a PROXY protocol header).
    case openingTimeout
    /// First bytes that are none of what the port serves (docs/tls.md, "One port for everything").
    case unknownProtocol
    /// A PROXY protocol header that is malformed, or from a source `proxy-protocol-from` does not list.
    case badProxyHeader
    /// A connection limit refused the client a PROXY header named (also counted as refused).
    case refused
    /// The HTTP API could not take a connection passed on to it (its backlog full): 503.
    case apiUnavailable

    public var label: String {
        switch self {
        case .clientClosed: return "client_closed"
        case .error: return "error"
        case .badFrame: return "bad_frame"
        case .tlsHandshakeFailed: return "tls_handshake_failed"
        case .tlsHandshakeTimeout: return "tls_handshake_timeout"
        case .idleTimeout: return "idle_timeout"
        case .slowReader: return "slow_reader"
        case .shutdown: return "shutdown"
        case .peerClosed: return "peer_closed"
        case .relayEnded: return "relay_ended"
        case .openingTimeout: return "opening_timeout"
        case .unknownProtocol: return "unknown_protocol"
        case .badProxyHeader: return "bad_proxy_header"
        case .refused: return "refused"
        case .apiUnavailable: return "api_unavailable"
        }
    }
}

/// Why a TCP/TLS connection was refused at accept.
public enum StreamRefusal: Int, CaseIterable, Sendable {
    /// `max-connections-per-ip` reached for the source address.
    case perIPLimit
    /// `max-connections` reached.
    case totalLimit
    /// `max-pending-connections-per-ip` connections without an allocation from the source address.
    case pendingPerIPLimit
    /// The source holds its fair share of `max-connections`, which is half taken or more.
    case totalShare
    /// `max-pending-connections` connections without an allocation on the node.
    case pendingLimit
    /// The source holds its fair share of `max-pending-connections`, which is half taken or more.
    case pendingShare
    /// No TLS context or no memory for the connection.
    case resources

    public var label: String {
        switch self {
        case .perIPLimit: return "per_ip_limit"
        case .totalLimit: return "total_limit"
        case .pendingPerIPLimit: return "pending_per_ip_limit"
        case .totalShare: return "total_share"
        case .pendingLimit: return "pending_limit"
        case .pendingShare: return "pending_share"
        case .resources: return "resources"
        }
    }
}

/// One loop thread's TCP/TLS counters: plain integers written only by that thread, summed at
/// scrape time like `CoreCounters`.
public struct StreamCounters: Sendable {
    /// Connections accepted, indexed by `TransportProtocol.rawValue` (udp stays 0).
    public var accepted = [UInt64](repeating: 0, count: TransportProtocol.allCases.count)
    public var refused = [UInt64](repeating: 0, count: StreamRefusal.allCases.count)
    public var closed = [UInt64](repeating: 0, count: StreamCloseReason.allCases.count)
    /// Connections open now on this thread.
    public var open = 0
    public var tlsHandshakesCompleted: UInt64 = 0
    public var tlsHandshakesFailed: UInt64 = 0
    /// TLS sessions whose records relayd took over from OpenSSL after the handshake
    /// (docs/tls.md, "After the handshake").
    public var tlsOwnRecords: UInt64 = 0
    /// accept() failures that paused a listener (out of descriptors or memory).
    public var acceptErrors: UInt64 = 0
    /// Packets for a connection that had already closed (dropped).
    public var sendsToClosed: UInt64 = 0
    /// Connections on a TURN port that turned out to be the HTTP API's (docs/tls.md).
    public var apiConnections: UInt64 = 0
    /// RFC 6062 pipes spliced in the kernel, and the bytes the kernel redirected for them
    /// (docs/tcp-relay.md, "In the kernel"; also in the relayed bytes).
    public var splicedPipes: UInt64 = 0
    public var splicedBytesToPeer: UInt64 = 0
    public var splicedBytesToClient: UInt64 = 0
    /// Bytes of retransmitted segments the kernel handed the splice program although the socket
    /// had received them before, which the program took out (docs/tcp-relay.md, "Retransmitted
    /// bytes").
    public var splicedOldBytes: UInt64 = 0

    public init() {}

    public func accepted(_ transport: TransportProtocol) -> UInt64 { accepted[Int(transport.rawValue)] }
    public func refused(_ refusal: StreamRefusal) -> UInt64 { refused[refusal.rawValue] }
    public func closed(_ reason: StreamCloseReason) -> UInt64 { closed[reason.rawValue] }

    /// Adds another thread's counters into these.
    public mutating func add(_ other: StreamCounters) {
        for i in accepted.indices { accepted[i] &+= other.accepted[i] }
        for i in refused.indices { refused[i] &+= other.refused[i] }
        for i in closed.indices { closed[i] &+= other.closed[i] }
        open += other.open
        tlsHandshakesCompleted &+= other.tlsHandshakesCompleted
        tlsHandshakesFailed &+= other.tlsHandshakesFailed
        tlsOwnRecords &+= other.tlsOwnRecords
        acceptErrors &+= other.acceptErrors
        sendsToClosed &+= other.sendsToClosed
        apiConnections &+= other.apiConnections
        splicedPipes &+= other.splicedPipes
        splicedBytesToPeer &+= other.splicedBytesToPeer
        splicedBytesToClient &+= other.splicedBytesToClient
        splicedOldBytes &+= other.splicedOldBytes
    }
}
