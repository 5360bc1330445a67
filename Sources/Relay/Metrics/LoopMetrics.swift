import RelayCore
import StunCodec

/// One loop thread's metrics at one moment: its counters, plus the gauges read off its core.
/// Built on the loop thread and handed to `MetricsRegistry`; sums of these are what `/metrics`
/// shows.
public struct LoopMetrics: Sendable {
    public var counters = CoreCounters()
    /// Live allocations by client transport and relayed address family (see `allocationIndex`).
    public var allocationsActive = [UInt64](repeating: 0, count: TransportProtocol.allCases.count * 2)
    public var permissionsActive: UInt64 = 0
    public var channelsActive: UInt64 = 0
    /// Relay ports in use and free on the whole node: every loop reads the same pool.
    public var relayPortsInUse: UInt64 = 0
    public var relayPortsFree: UInt64 = 0
    /// Relay ports left out of the search for up to a minute: another socket held them.
    public var relayPortsForeign: UInt64 = 0
    public var lifetimes = LifetimeHistogram()
    /// TLS handshakes completed and failed; the stream transport layer fills these in.
    public var tlsHandshakesOK: UInt64 = 0
    public var tlsHandshakesFailed: UInt64 = 0
    /// TLS sessions whose records relayd keeps itself after the handshake (docs/tls.md).
    public var tlsOwnRecords: UInt64 = 0
    /// DTLS handshakes after the cookie exchange, completed and not (docs/dtls.md).
    public var dtlsHandshakesOK: UInt64 = 0
    public var dtlsHandshakesFailed: UInt64 = 0
    /// DTLS sessions their client restarted (RFC 6347 §4.2.8), by the new handshake's result;
    /// HelloVerifyRequests sent from sessions' sockets; datagrams dropped there before OpenSSL.
    public var dtlsRestartsOK: UInt64 = 0
    public var dtlsRestartsFailed: UInt64 = 0
    public var dtlsSessionHelloVerifyRequests: UInt64 = 0
    public var dtlsSessionDrops: UInt64 = 0
    /// Datagrams in DTLS's range dropped on UDP listeners DTLS shares (docs/dtls.md).
    public var dtlsSharedPortDrops: UInt64 = 0
    /// TCP/TLS connections closed at accept, by `StreamRefusal`; the stream transport fills these in.
    public var connectionsRefused = [UInt64](repeating: 0, count: StreamRefusal.allCases.count)
    /// TCP/TLS connections accepted, by `TransportProtocol.rawValue` (on a shared port, once the
    /// first byte said which), and closed, by `StreamCloseReason`.
    public var connectionsAccepted = [UInt64](repeating: 0, count: TransportProtocol.allCases.count)
    public var connectionsClosed = [UInt64](repeating: 0, count: StreamCloseReason.allCases.count)
    /// Connections on a TURN port passed to the HTTP API (docs/tls.md).
    public var apiConnections: UInt64 = 0
    /// RFC 6062 pipes spliced in the kernel, and what the kernel redirected for them.
    public var splicedPipes: UInt64 = 0
    public var splicedBytesToPeer: UInt64 = 0
    public var splicedBytesToClient: UInt64 = 0
    /// Retransmitted bytes the splice program took out of segments it was handed again.
    public var splicedOldBytes: UInt64 = 0
    /// What the kernel fast path relayed for this loop's allocations (also in `counters`); the
    /// fast path fills it in.
    public var kernelRelayed = TrafficCounters()
    /// Channel routes this loop has installed in the kernel.
    public var kernelRoutes: UInt64 = 0
    /// 1 when the kernel fast path is attached (reported by loop 0 only, so the sum says it once).
    public var offloadEnabled: UInt64 = 0
    /// The program's own counts of packets left to relayd (expired, length mismatch, no egress),
    /// machine-wide: reported by loop 0 only.
    public var offloadFallback: [UInt64] = [0, 0, 0]
    /// Of the kernel-relayed packets, those the XDP program relayed, machine-wide (loop 0 only).
    public var offloadXDP: UInt64 = 0
    /// UDP datagrams the kernel refused to send (an unreachable peer, a datagram over the path
    /// MTU of a DONT-FRAGMENT allocation, a full socket buffer).
    public var sendFailures: UInt64 = 0
    /// The state journal (docs/state-journal.md): allocations restored at start-up and those that
    /// could not be, journals refused at start-up (loop 0 reports them), and failed writes.
    public var stateRestored: UInt64 = 0
    public var stateNotRestored: UInt64 = 0
    public var stateJournalsRefused: UInt64 = 0
    public var stateJournalWriteFailures: UInt64 = 0

    public init() {}

    /// Position of a (transport, family) pair in `allocationsActive`.
    public static func allocationIndex(_ transport: TransportProtocol, _ family: IPAddress.Family) -> Int {
        Int(transport.rawValue) * 2 + (family == .ipv4 ? 0 : 1)
    }

    public func allocations(_ transport: TransportProtocol, _ family: IPAddress.Family) -> UInt64 {
        allocationsActive[Self.allocationIndex(transport, family)]
    }

    /// Reads `core` at monotonic second `now`: counters are copied element by element (so the
    /// core's arrays never become shared and its next increment never copies), gauges are
    /// counted over the live allocations. The lifetime histogram comes from the loop's
    /// `SessionMetrics`.
    public init(capturing core: RelayCore, now: Int64) {
        counters.add(core.counters)
        for allocation in core.allocations {
            allocationsActive[
                Self.allocationIndex(allocation.origin.fiveTuple.transport, allocation.relayedAddress.ip.family)] &+= 1
            for p in allocation.permissions where p.expiry > now { permissionsActive &+= 1 }
            for c in allocation.channels where c.expiry > now { channelsActive &+= 1 }
        }
        relayPortsInUse = UInt64(core.relayPortsInUse)
        relayPortsFree = UInt64(core.relayPortsFree)
        relayPortsForeign = UInt64(core.relayPortsForeign)
    }

    /// Adds another thread's metrics into these.
    public mutating func add(_ other: LoopMetrics) {
        counters.add(other.counters)
        for i in allocationsActive.indices { allocationsActive[i] &+= other.allocationsActive[i] }
        permissionsActive &+= other.permissionsActive
        channelsActive &+= other.channelsActive
        // The node's one port pool, read by every loop: the freshest reading, not a sum.
        if other.relayPortsInUse + other.relayPortsFree + other.relayPortsForeign > 0 {
            relayPortsInUse = other.relayPortsInUse
            relayPortsFree = other.relayPortsFree
            relayPortsForeign = other.relayPortsForeign
        }
        lifetimes.add(other.lifetimes)
        tlsHandshakesOK &+= other.tlsHandshakesOK
        tlsHandshakesFailed &+= other.tlsHandshakesFailed
        tlsOwnRecords &+= other.tlsOwnRecords
        dtlsHandshakesOK &+= other.dtlsHandshakesOK
        dtlsHandshakesFailed &+= other.dtlsHandshakesFailed
        dtlsRestartsOK &+= other.dtlsRestartsOK
        dtlsRestartsFailed &+= other.dtlsRestartsFailed
        dtlsSessionHelloVerifyRequests &+= other.dtlsSessionHelloVerifyRequests
        dtlsSessionDrops &+= other.dtlsSessionDrops
        dtlsSharedPortDrops &+= other.dtlsSharedPortDrops
        for i in connectionsRefused.indices { connectionsRefused[i] &+= other.connectionsRefused[i] }
        for i in connectionsAccepted.indices { connectionsAccepted[i] &+= other.connectionsAccepted[i] }
        for i in connectionsClosed.indices { connectionsClosed[i] &+= other.connectionsClosed[i] }
        apiConnections &+= other.apiConnections
        splicedPipes &+= other.splicedPipes
        splicedBytesToPeer &+= other.splicedBytesToPeer
        splicedBytesToClient &+= other.splicedBytesToClient
        splicedOldBytes &+= other.splicedOldBytes
        kernelRelayed += other.kernelRelayed
        kernelRoutes &+= other.kernelRoutes
        offloadEnabled &+= other.offloadEnabled
        for i in offloadFallback.indices { offloadFallback[i] &+= other.offloadFallback[i] }
        offloadXDP &+= other.offloadXDP
        sendFailures &+= other.sendFailures
        stateRestored &+= other.stateRestored
        stateNotRestored &+= other.stateNotRestored
        stateJournalsRefused &+= other.stateJournalsRefused
        stateJournalWriteFailures &+= other.stateJournalWriteFailures
    }
}
