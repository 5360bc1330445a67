import StunCodec

/// One live allocation as the admin API lists it (docs/admin.md): a copy taken on its loop
/// thread, so the main thread can render it while the loop goes on.
public struct AllocationRecord: Sendable {
    /// The id of its log lines (`session`): 16 hex digits.
    public var session: String
    /// The user id (the part after the REST separator, or the whole USERNAME), behind
    /// `<tenant>/` for a tenant other than the default one (docs/tenants.md).
    public var user: String
    /// Its tenant's name; empty for the default tenant.
    public var tenant: String
    public var fiveTuple: FiveTuple
    /// The relayed addresses as the client was told them (advertised form): one, or two for a
    /// dual allocation (RFC 8656 §7.2).
    public var relayed: [TransportAddress]
    public var ageSeconds: Int64
    /// Seconds until the allocation expires unless refreshed (RFC 8656 §8).
    public var remainingSeconds: Int64
    /// Peer IPs with a live permission (RFC 8656 §9), and the seconds each has left.
    public var permissions: [(peer: IPAddress, remainingSeconds: Int64)]
    /// Bound channels (RFC 8656 §12): number, peer, seconds left.
    public var channels: [(number: UInt16, peer: TransportAddress, remainingSeconds: Int64)]
    /// What it relayed so far, in user space and in the kernel fast path (collected once a
    /// second), and for a TCP allocation the bytes its pipes carried (RFC 6062 §5.5).
    public var traffic: TrafficCounters
    /// Whether it holds a mobility ticket (RFC 8016).
    public var mobile: Bool
    /// The loop thread that holds it.
    public var thread: Int

    public init(
        session: String, user: String, tenant: String = "", fiveTuple: FiveTuple, relayed: [TransportAddress], ageSeconds: Int64,
        remainingSeconds: Int64, permissions: [(peer: IPAddress, remainingSeconds: Int64)],
        channels: [(number: UInt16, peer: TransportAddress, remainingSeconds: Int64)], traffic: TrafficCounters,
        mobile: Bool, thread: Int
    ) {
        self.session = session
        self.user = user
        self.tenant = tenant
        self.fiveTuple = fiveTuple
        self.relayed = relayed
        self.ageSeconds = ageSeconds
        self.remainingSeconds = remainingSeconds
        self.permissions = permissions
        self.channels = channels
        self.traffic = traffic
        self.mobile = mobile
        self.thread = thread
    }
}

/// Which allocations an admin request names.
public enum AllocationSelector: Sendable, Hashable {
    case all
    /// The one with this `session` id.
    case session(String)
    /// Every allocation of this user id.
    case user(String)

    func matches(session: String, user: Substring) -> Bool {
        switch self {
        case .all: return true
        case .session(let s): return s == session
        case .user(let u): return u == user
        }
    }
}

/// One user's live allocations and what they relayed so far: the status page's "top users".
public struct UserTraffic: Sendable, Equatable {
    public var user: String
    public var allocations: Int
    public var traffic: TrafficCounters

    public init(user: String, allocations: Int, traffic: TrafficCounters) {
        self.user = user
        self.allocations = allocations
        self.traffic = traffic
    }

    /// Bytes in both directions.
    public var bytes: UInt64 { traffic.bytesToPeer &+ traffic.bytesToClient }

    /// `parts` summed by user: allocations and traffic added up.
    public static func byUser(_ parts: some Sequence<UserTraffic>) -> [String: UserTraffic] {
        var users: [String: UserTraffic] = [:]
        for part in parts {
            users[part.user, default: UserTraffic(user: part.user, allocations: 0, traffic: TrafficCounters())]
                .allocations += part.allocations
            users[part.user]!.traffic += part.traffic
        }
        return users
    }
}
