import RelayCore
import CLibevent
import Synchronization

/// What another thread hands one loop thread (docs/architecture.md, "Threads"). The loop's own
/// thread applies it between packets, so the core never sees a half-applied configuration and
/// the data path takes no lock.
enum LoopMail: Sendable {
    /// A new configuration (a reload, the drain flag); live allocations keep their state.
    case context(CoreContext)
    /// A request another loop received for an allocation this loop holds (mobility, RFC 8016).
    case forwarded(ForwardedRequest)
    /// The admission ledger's decision on an Allocate this loop holds as pending.
    case admission(AdmissionAnswer)
    /// The user database's answer to a lookup this loop asked for (docs/userdb.md).
    case userLookedUp(UserLookup, UserDatabaseWatcher.LookupResult)
    /// An admin request this loop answers through the task's reply (docs/admin.md).
    case admin(AdminTask)
    /// A TCP allocation that another loop ended had its peer connection `id` piped here
    /// (RFC 6062, docs/tcp-relay.md): end the pipe.
    case closePipe(PeerConnectionID)
    /// A step of a live upgrade (docs/live-upgrade.md).
    case handover(HandoverStep)
    /// The node's keys changed (SIGHUP draws new ticket keys): the state journal keeps these.
    case journalKeys([JournalKey])
}

/// One loop thread's inbox: one post from any thread, one take on the loop's thread, in the
/// order posted. Posting wakes the loop.
final class LoopMailbox: Sendable {
    private struct State {
        var mail: [LoopMail] = []
        /// Forwarded requests waiting, bounded: a flood of mobility tickets cannot grow the
        /// queue without limit (the client retransmits what is dropped).
        var forwarded = 0
        /// The loop's wake-up event (an `event*` as an integer), 0 while no loop is attached.
        var event: UInt = 0
    }

    private let state = Locked(State())

    init() {}

    /// Forwarded requests one loop holds at most.
    static let requestLimit = 1024

    /// Called on the loop thread once its event exists.
    func attach(_ event: OpaquePointer) {
        state.withLock { $0.event = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(event))) }
    }

    /// Called on the loop thread before it frees the event; later posts are only stored.
    func detach() { state.withLock { $0.event = 0 } }

    /// From any thread. A new context replaces one not yet taken (the latest wins); a forwarded
    /// request past `requestLimit` is dropped. Admission decisions are never dropped: a granted
    /// one carries a lease the loop must take or give back. The wake-up happens under the lock,
    /// so it never races with `detach` and `event_free`.
    func post(_ mail: LoopMail) {
        state.withLock { s in
            switch mail {
            case .context:
                if let earlier = s.mail.firstIndex(where: { if case .context = $0 { true } else { false } }) {
                    return s.mail[earlier] = mail
                }
            case .forwarded:
                guard s.forwarded < Self.requestLimit else { return }
                s.forwarded += 1
            case .admission, .admin, .closePipe, .handover, .journalKeys, .userLookedUp:
                break
            }
            s.mail.append(mail)
            if s.event != 0 { event_active(OpaquePointer(bitPattern: s.event), 0, 0) }
        }
    }

    /// On the loop thread: everything posted since the last call, in order.
    func take() -> [LoopMail] {
        state.withLock { s in
            s.forwarded = 0
            defer { s.mail.removeAll() }
            return s.mail
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
    /// One page: at most `limit` allocations after session `after`; `tenant`: only that
    /// tenant's (a tenant's admin key, docs/tenants.md), nil: all.
    case list(AllocationSelector, tenant: String?, after: String?, limit: Int)
    case terminate(AllocationSelector, tenant: String?)
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
