/// Why a packet was dropped without an answer; each reason is counted.
public enum DropReason: Int, CaseIterable, Sendable {
    case malformed
    case notStun
    case unexpectedMessage
    case noAllocation
    case noPermission
    case noChannel
    case policy
    /// Over the source's `unauth-rate-limit` (challenges not answered with valid credentials).
    case rateLimited
    /// Over the source's `auth-failure-rate-limit` (failed authentications).
    case authFailureLimited
    case outboxFull
    /// Over an allocation's `max-bps` budget for the current second.
    case bandwidth
    /// An ICMP error not passed to the client (RFC 8656 §11.5): over the allocation's rate, or of
    /// a kind the RFC does not relay (docs/icmp.md).
    case icmp

    public var label: String {
        switch self {
        case .malformed: return "malformed"
        case .notStun: return "not_stun"
        case .unexpectedMessage: return "unexpected_message"
        case .noAllocation: return "no_allocation"
        case .noPermission: return "no_permission"
        case .noChannel: return "no_channel"
        case .policy: return "policy"
        case .rateLimited: return "rate_limit"
        case .authFailureLimited: return "auth_failure_limit"
        case .outboxFull: return "outbox_full"
        case .bandwidth: return "bandwidth"
        case .icmp: return "icmp"
        }
    }
}

/// Result of authenticating a request (RFC 8489 §9.2.4).
public enum AuthOutcome: Int, CaseIterable, Sendable {
    case ok
    case challenged
    case staleNonce
    case badIntegrity
    case expired
    case unknownUser
    case wrongCredentials
    /// USERNAME, REALM or NONCE missing or malformed (400, RFC 8489 §9.2.4, §14.3).
    case malformed

    public var label: String {
        switch self {
        case .ok: return "ok"
        case .challenged: return "challenge"
        case .staleNonce: return "stale_nonce"
        case .badIntegrity: return "bad_integrity"
        case .expired: return "expired"
        case .unknownUser: return "unknown_user"
        case .wrongCredentials: return "wrong_credentials"
        case .malformed: return "malformed"
        }
    }
}

/// What became of a Refresh that carried a mobility ticket from a new 5-tuple (RFC 8016).
public enum MobilityOutcome: Int, CaseIterable, Sendable {
    /// The allocation moved to the new 5-tuple.
    case moved
    /// Handed to the loop thread that holds the allocation (counted again there).
    case forwarded
    /// Refused: an unreadable, used or foreign ticket, or mobility turned off.
    case refused

    public var label: String {
        switch self {
        case .moved: return "moved"
        case .forwarded: return "forwarded"
        case .refused: return "refused"
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

/// Why an allocation ended.
public enum AllocationEnd: String, Sendable {
    case refreshedToZero = "refresh_zero"
    case expired
    case connectionClosed = "connection_closed"
    case shutdown
    /// Ended by an operator through the admin API (docs/admin.md).
    case terminated
    /// Handed to the process that replaced this one in a live upgrade (docs/live-upgrade.md):
    /// it goes on there.
    case handedOver = "handed_over"
}

/// One loop thread's counters: plain integers, written only by that thread, summed at scrape time.
public struct CoreCounters: Sendable {
    public var bindingRequests: UInt64 = 0
    public var allocationsCreated: UInt64 = 0
    public var allocationsExpired: UInt64 = 0
    public var allocationsDeleted: UInt64 = 0
    /// Allocations an operator ended through the admin API (also in `allocationsDeleted`).
    public var allocationsTerminated: UInt64 = 0
    /// Allocates refused with 403 because their user is blocked (docs/admin.md).
    public var allocatesOfBlockedUsers: UInt64 = 0
    /// Allocates held while a user the user database's view lacked was looked up (docs/userdb.md).
    public var userLookupsHeld: UInt64 = 0
    public var packetsToPeer: UInt64 = 0
    public var bytesToPeer: UInt64 = 0
    public var packetsToClient: UInt64 = 0
    public var bytesToClient: UInt64 = 0
    /// Client-to-peer packets delivered straight to another allocation on the same thread
    /// (relay-to-relay short-circuit); also counted in `packetsToPeer` and `packetsToClient`.
    public var shortCircuited: UInt64 = 0
    /// Data indications with an ICMP attribute sent to clients (RFC 8656 §11.5).
    public var icmpIndications: UInt64 = 0
    /// Mobility refreshes by outcome, indexed like `MobilityOutcome.allCases`.
    public var mobility = [UInt64](repeating: 0, count: MobilityOutcome.allCases.count)
    /// Allocations created, indexed like `CredentialAlgorithms.all`.
    public var allocationsByCredentials = [UInt64](repeating: 0, count: CredentialAlgorithms.all.count)
    public var drops = [UInt64](repeating: 0, count: DropReason.allCases.count)
    public var auth = [UInt64](repeating: 0, count: AuthOutcome.allCases.count)
    /// Error responses sent, indexed like `RelayError.allCases`.
    public var errorResponses = [UInt64](repeating: 0, count: RelayError.allCases.count)
    /// Peer connections of TCP allocations by outcome, indexed like `TCPConnectionOutcome.allCases` (RFC 6062).
    public var tcpConnections = [UInt64](repeating: 0, count: TCPConnectionOutcome.allCases.count)
    /// Bytes piped between data connections and peer connections (RFC 6062 §5.5), each way;
    /// counted by the loop thread that runs the pipe.
    public var tcpBytesToPeer: UInt64 = 0
    public var tcpBytesToClient: UInt64 = 0

    public init() {}

    @inlinable
    public mutating func drop(_ reason: DropReason) { drops[reason.rawValue] &+= 1 }

    public func dropped(_ reason: DropReason) -> UInt64 { drops[reason.rawValue] }
    public func authenticated(_ outcome: AuthOutcome) -> UInt64 { auth[outcome.rawValue] }
    public func errors(_ error: RelayError) -> UInt64 {
        errorResponses[RelayError.allCases.firstIndex(of: error)!]
    }

    /// Adds another thread's counters into these.
    public mutating func add(_ other: CoreCounters) {
        bindingRequests &+= other.bindingRequests
        allocationsCreated &+= other.allocationsCreated
        allocationsExpired &+= other.allocationsExpired
        allocationsDeleted &+= other.allocationsDeleted
        allocationsTerminated &+= other.allocationsTerminated
        allocatesOfBlockedUsers &+= other.allocatesOfBlockedUsers
        userLookupsHeld &+= other.userLookupsHeld
        packetsToPeer &+= other.packetsToPeer
        bytesToPeer &+= other.bytesToPeer
        packetsToClient &+= other.packetsToClient
        bytesToClient &+= other.bytesToClient
        shortCircuited &+= other.shortCircuited
        icmpIndications &+= other.icmpIndications
        for i in mobility.indices { mobility[i] &+= other.mobility[i] }
        for i in allocationsByCredentials.indices { allocationsByCredentials[i] &+= other.allocationsByCredentials[i] }
        for i in drops.indices { drops[i] &+= other.drops[i] }
        for i in auth.indices { auth[i] &+= other.auth[i] }
        for i in errorResponses.indices { errorResponses[i] &+= other.errorResponses[i] }
        for i in tcpConnections.indices { tcpConnections[i] &+= other.tcpConnections[i] }
        tcpBytesToPeer &+= other.tcpBytesToPeer
        tcpBytesToClient &+= other.tcpBytesToClient
    }
}
