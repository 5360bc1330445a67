import CLibevent
import RelayCore

/// Allocates the loop threads hand the cluster agent for its quota check (docs/cluster.md):
/// a queue under a lock, and the main loop's wake-up event. Bounded: past the bound a request
/// is answered `.local` at once, so a flood cannot grow it nor stall an Allocate.
final class AdmissionInbox: Sendable {
    private struct State {
        var requests: [AdmissionRequest] = []
        var event: UInt = 0
    }

    private let state = Locked(State())
    static let limit = 4096

    /// On the main thread, once its event exists.
    func attach(_ event: OpaquePointer) {
        state.withLock { $0.event = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(event))) }
    }

    /// On the main thread, before the event is freed.
    func detach() { state.withLock { $0.event = 0 } }

    /// From a loop thread; false when the inbox is full or no agent listens.
    func post(_ request: AdmissionRequest) -> Bool {
        state.withLock { s in
            guard s.event != 0, s.requests.count < Self.limit else { return false }
            s.requests.append(request)
            event_active(OpaquePointer(bitPattern: s.event), 0, 0)
            return true
        }
    }

    /// On the main thread: the requests posted since the last call.
    func take() -> [AdmissionRequest] {
        state.withLock { s in
            defer { s.requests.removeAll() }
            return s.requests
        }
    }
}
