import StunCodec

/// What every loop thread's core knows of the cluster (docs/cluster.md), kept current by the
/// cluster agent on the main thread: whether Redis answers, where to redirect a client this node
/// cannot serve, and the cluster-wide quota. Read on Allocate only, never on the data path.
public final class ClusterLink: Sendable {
    /// Another live, non-draining node a client can be sent to (RFC 8489 §10, ALTERNATE-SERVER).
    public struct Alternate: Sendable, Equatable {
        public var name: String
        /// The node's STUN/TURN addresses (UDP and TCP share the port), at most one per family.
        public var addresses: [TransportAddress]
        /// Its TLS port, when it serves TLS.
        public var tlsPort: UInt16?

        public init(name: String, addresses: [TransportAddress], tlsPort: UInt16?) {
            self.name = name
            self.addresses = addresses
            self.tlsPort = tlsPort
        }
    }

    private struct State {
        var redisUp = false
        var clusterTotalQuota: Int
        /// Least loaded first.
        var alternates: [Alternate] = []
    }

    private let state: Locked<State>

    public init(clusterTotalQuota: Int = 0) {
        state = Locked(State(clusterTotalQuota: clusterTotalQuota))
    }

    public var redisUp: Bool { state.withLock { $0.redisUp } }
    public var clusterTotalQuota: Int { state.withLock { $0.clusterTotalQuota } }

    public func update(redisUp: Bool) { state.withLock { $0.redisUp = redisUp } }
    public func update(alternates: [Alternate]) { state.withLock { $0.alternates = alternates } }
    public func update(clusterTotalQuota: Int) { state.withLock { $0.clusterTotalQuota = clusterTotalQuota } }

    /// Whether an Allocate must ask Redis before it is granted: a quota counts across nodes
    /// (`user-quota`, `cluster-total-quota`) and Redis answers. Otherwise the node decides alone.
    public func needsAdmission(userQuota: Int) -> Bool {
        state.withLock { $0.redisUp && (userQuota > 0 || $0.clusterTotalQuota > 0) }
    }

    /// The least loaded other node reachable in `family` over the client's transport: the TLS
    /// port for a TLS client, the STUN/TURN port otherwise; nil when there is none.
    public func alternate(family: IPAddress.Family, transport: TransportProtocol) -> TransportAddress? {
        state.withLock { s in
            for node in s.alternates {
                guard let address = node.addresses.first(where: { $0.ip.family == family }) else { continue }
                if transport == .tls {
                    guard let port = node.tlsPort else { continue }
                    return TransportAddress(ip: address.ip, port: port)
                }
                return address
            }
            return nil
        }
    }
}

/// What Redis said about one Allocate that needed the cluster's quotas (`CoreCommand.admitAllocation`).
public enum ClusterAdmission: Sendable, Equatable {
    /// Under every quota; Redis already counts the allocation for this node.
    case granted
    /// Over a quota: 486 (`user-quota`) or 508 (`cluster-total-quota`).
    case refused(RelayError)
    /// Redis did not answer in time: the node decides on its own counts.
    case local
}

/// An Allocate held until Redis has counted it against the cluster's quotas.
public struct AdmissionRequest: Sendable {
    public let thread: Int
    public let bytes: [UInt8]
    public let origin: ClientOrigin
    /// The user id the quotas count (the part after the REST separator).
    public let user: String
}
