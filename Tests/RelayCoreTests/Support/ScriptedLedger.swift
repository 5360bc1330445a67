import RelayCore
import StunCodec

/// An admission ledger a core test scripts: it records every question, and either holds each
/// Allocate as pending (the test decides later, as a cluster ledger would after asking Redis) or
/// lets the node's own `LocalAdmissionLedger` decide at once. Its leases are the local ledger's,
/// so a test sees exactly what was taken and given back.
final class ScriptedLedger: AdmissionLedger {
    let local: LocalAdmissionLedger
    private let state: Locked<State>

    private struct State {
        var holding: Bool
        var asked: [AdmissionRequest] = []
        var alternate: TransportAddress?
    }

    init(local: LocalAdmissionLedger, holding: Bool = true, alternate: TransportAddress? = nil) {
        self.local = local
        state = Locked(State(holding: holding, alternate: alternate))
    }

    func admit(_ request: AdmissionRequest) -> AdmissionDecision {
        let holding = state.withLock { s in
            s.asked.append(request)
            return s.holding
        }
        return holding ? .pending(request.ticket) : local.admit(request)
    }

    func release(_ lease: AdmissionLease) { local.release(lease) }

    func readmit(_ lease: AdmissionLease) -> AdmissionLease { local.readmit(lease) }

    func alternate(family: IPAddress.Family, transport: TransportProtocol) -> TransportAddress? {
        state.withLock { $0.alternate }
    }

    /// Every question asked, in order.
    var asked: [AdmissionRequest] { state.withLock { $0.asked } }
}
