import RelayCore
import CLibevent
import Synchronization

/// Hands a new `CoreContext` (a reloaded configuration, the drain flag) from the main thread to
/// one loop thread, and requests other loop threads forward to it (`CoreCommand.forwardRequest`). The loop's own thread swaps it into its core between packets, so the core
/// never sees a half-applied configuration and the data path takes no lock: the configuration
/// is an immutable value replaced per loop.
final class LoopMailbox: Sendable {
    private struct State {
        var context: CoreContext?
        /// Requests other loops received for allocations this loop holds (mobility, RFC 8016).
        var requests: [ForwardedRequest] = []
        /// The admission ledger's decisions on this loop's pending Allocates (docs/cluster.md).
        var admitted: [AdmissionAnswer] = []
        /// The admin API's requests: list or end allocations (docs/admin.md).
        var adminTasks: [AdminTask] = []
        /// Pipes of TCP allocations another loop ended (RFC 6062, docs/tcp-relay.md), by connection id.
        var pipesToClose: [UInt32] = []
        /// The loop's wake-up event (an `event*` as an integer), 0 while no loop is attached.
        var event: UInt = 0
    }

    private let state = Locked(State())

    init() {}

    /// Called on the loop thread once its event exists.
    func attach(_ event: OpaquePointer) {
        state.withLock { $0.event = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(event))) }
    }

    /// Called on the loop thread before it frees the event; later posts only store the context.
    func detach() { state.withLock { $0.event = 0 } }

    /// From any thread: the latest context wins; the loop applies it on its next iteration.
    /// The wake-up happens under the lock, so it never races with `detach` and `event_free`.
    func post(_ context: CoreContext) {
        state.withLock { s in
            s.context = context
            if s.event != 0 { event_active(OpaquePointer(bitPattern: s.event), 0, 0) }
        }
    }

    /// From any thread: a request for an allocation this loop holds; bounded, so a flood of
    /// tickets cannot grow it without limit (the client retransmits what is dropped).
    func post(_ request: ForwardedRequest) {
        state.withLock { s in
            guard s.requests.count < LoopMailbox.requestLimit else { return }
            s.requests.append(request)
            if s.event != 0 { event_active(OpaquePointer(bitPattern: s.event), 0, 0) }
        }
    }

    static let requestLimit = 1024

    /// From the main thread: the decision on an Allocate this loop holds as pending. Never
    /// dropped: a granted decision carries a lease the loop must take or give back.
    func post(_ answer: AdmissionAnswer) {
        state.withLock { s in
            s.admitted.append(answer)
            if s.event != 0 { event_active(OpaquePointer(bitPattern: s.event), 0, 0) }
        }
    }

    /// From the main thread: an admin request every loop answers through `task.reply`.
    func post(_ task: AdminTask) {
        state.withLock { s in
            s.adminTasks.append(task)
            if s.event != 0 { event_active(OpaquePointer(bitPattern: s.event), 0, 0) }
        }
    }

    /// From any loop thread: the allocation of peer connection `id`, piped on this loop, ended.
    func post(closingPipe id: UInt32) {
        state.withLock { s in
            s.pipesToClose.append(id)
            if s.event != 0 { event_active(OpaquePointer(bitPattern: s.event), 0, 0) }
        }
    }

    /// On the loop thread: the pipes to end posted since the last call.
    func takePipesToClose() -> [UInt32] {
        state.withLock { s in
            defer { s.pipesToClose.removeAll() }
            return s.pipesToClose
        }
    }

    /// On the loop thread: the admin requests posted since the last call.
    func takeAdminTasks() -> [AdminTask] {
        state.withLock { s in
            defer { s.adminTasks.removeAll() }
            return s.adminTasks
        }
    }

    /// On the loop thread: the admission decisions posted since the last call.
    func takeAdmitted() -> [AdmissionAnswer] {
        state.withLock { s in
            defer { s.admitted.removeAll() }
            return s.admitted
        }
    }

    /// On the loop thread: the requests posted since the last call.
    func takeRequests() -> [ForwardedRequest] {
        state.withLock { s in
            defer { s.requests.removeAll() }
            return s.requests
        }
    }

    /// On the loop thread: the context posted since the last call, if any.
    func take() -> CoreContext? {
        state.withLock { s in
            defer { s.context = nil }
            return s.context
        }
    }
}

/// The admission ledger's decision on a pending Allocate, named by its ticket.
struct AdmissionAnswer: Sendable {
    let ticket: AdmissionTicket
    let decision: AdmissionDecision
}

/// What the admin API asks every loop thread (docs/admin.md).
enum AdminOperation: Sendable {
    /// One page: at most `limit` allocations after session `after`.
    case list(AllocationSelector, after: String?, limit: Int)
    case terminate(AllocationSelector)
    /// Live allocations summed by user (the status page).
    case userTraffic
}

/// One loop thread's answer to an `AdminOperation`.
enum AdminAnswer: Sendable {
    /// A loop's page, with how many of its allocations match and how many lie after the cursor.
    case records([AllocationRecord], matching: Int, remaining: Int)
    case terminated(Int)
    case users([String: UserTraffic])
}

/// An admin request posted to a loop, with where its answer goes (called on the loop thread).
struct AdminTask: Sendable {
    let operation: AdminOperation
    let reply: @Sendable (AdminAnswer) -> Void
}
