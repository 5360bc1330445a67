import RelayCore
import StunCodec

/// The core fuzzer's admission ledger: the node's `LocalAdmissionLedger`, and in cluster mode
/// a simulated Redis in front of it, as the daemon's cluster ledger behaves (docs/cluster.md):
/// every Allocate is answered `.pending`, and the fuzz input decides later whether Redis grants
/// it (counted for this node), refuses it, or stays silent (the node decides alone).
final class FuzzClusterLedger: AdmissionLedger {
    let local: LocalAdmissionLedger
    private let state = Locked(State())

    private struct State {
        var clustered = false
        var pending: [AdmissionRequest] = []
        /// What Redis counts for this node: its share when it joined, grants, and the deltas.
        var redisCount = 0
    }

    static let other = TransportAddress("192.0.2.200:3478")!

    init(local: LocalAdmissionLedger) { self.local = local }

    func admit(_ request: AdmissionRequest) -> AdmissionDecision {
        let queued = state.withLock { s -> Bool in
            guard s.clustered else { return false }
            s.pending.append(request)
            return true
        }
        return queued ? .pending(request.ticket) : local.admit(request)
    }

    func release(_ lease: AdmissionLease) { local.release(lease) }

    func readmit(_ lease: AdmissionLease) -> AdmissionLease { local.readmit(lease) }

    func alternate(family: IPAddress.Family, transport: TransportProtocol) -> TransportAddress? {
        state.withLock { $0.clustered } && family == .ipv4 ? Self.other : nil
    }

    /// Cluster mode with `user-quota` 2: as the cluster ledger does on connecting, this node's
    /// share is written from its own counts.
    func joinCluster() {
        local.update(limits: .init(userQuota: 2))
        local.startMirroring()
        let share = local.snapshotForMirror().total
        state.withLock {
            $0.clustered = true
            $0.redisCount = share
        }
    }

    var clustered: Bool { state.withLock { $0.clustered } }
    var pendingCount: Int { state.withLock { $0.pending.count } }

    /// The oldest pending Allocate's ticket and decision, as Redis would answer by `b`: granted
    /// (counted), over `user-quota`, over `cluster-total-quota`, or no answer (decided locally).
    func answerOldest(_ b: UInt8) -> (AdmissionTicket, AdmissionDecision)? {
        guard let request = state.withLock({ s in s.pending.isEmpty ? nil : s.pending.removeFirst() }) else {
            return nil
        }
        switch b & 3 {
        case 0:
            state.withLock { $0.redisCount += 1 }
            return (request.ticket, local.admitCounted(request))
        case 1: return (request.ticket, .refused(.init(.userQuota)))
        case 2: return (request.ticket, .refused(.init(.clusterQuota)))
        default: return (request.ticket, local.admit(request))
        }
    }

    /// Applies the node's deltas to the simulated Redis and returns its count for this node.
    func syncRedis() -> Int {
        let deltas = local.takeDeltas()
        return state.withLock { s in
            s.redisCount += deltas.total
            return s.redisCount
        }
    }
}
