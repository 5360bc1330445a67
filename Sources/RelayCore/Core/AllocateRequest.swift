import StunCodec

/// An authenticated Allocate whose attributes passed the checks of RFC 8656 §7.2 (steps 1-9):
/// everything needed to create the allocation and answer it, without the request's bytes. It is
/// what the core keeps while the admission ledger's answer is pending.
struct AllocateRequest {
    var origin: ClientOrigin
    var reply: ReplyTarget
    var auth: RelayCore.Authenticated
    /// The user id quotas count (docs/auth.md).
    var userID: String
    /// REQUESTED-TRANSPORT TCP (RFC 6062 §5.1).
    var tcp: Bool
    /// REQUESTED-ADDRESS-FAMILY, or IPv4 (RFC 6156 §4).
    var family: IPAddress.Family
    /// ADDITIONAL-ADDRESS-FAMILY (standard or coturn's draft code point): an IPv4 and an IPv6 relayed address.
    var dual: Bool
    /// ADDRESS-ERROR-CODE goes out under coturn's draft code point (the client asked with it).
    var draftAddressError: Bool
    var evenPort: EvenPort?
    var token: ReservationToken?
    /// MOBILITY-TICKET asked for (RFC 8016 §3.1).
    var mobile: Bool
    /// DONT-FRAGMENT (RFC 8656 §18.9).
    var dontFragment: Bool
    var requestedLifetime: Lifetime?
}

/// Allocates waiting for the admission ledger's answer (a cluster asks Redis), by 5-tuple, each
/// with its ticket. A retransmission meanwhile is neither charged nor asked again; the answer
/// for a ticket no longer held (the connection closed, the client asked again after
/// `patience`) finds nothing, and a granted lease goes back.
struct PendingAllocates {
    struct Entry {
        var request: AllocateRequest
        var ticket: AdmissionTicket
        var since: Int64
    }

    private(set) var byFiveTuple: [FiveTuple: Entry] = [:]
    private var byTicket: [AdmissionTicket: FiveTuple] = [:]
    private var serial: UInt64 = 0

    /// Seconds a pending Allocate holds back retransmissions of itself; later, one asks again.
    static let patience: Int64 = 2
    /// Seconds after which an answer that never came is given up (the sweep forgets it).
    static let giveUp: Int64 = 30
    /// Pending Allocates one loop holds at most; beyond, 508.
    static let backlog = 4096

    var count: Int { byFiveTuple.count }

    /// Whether `fiveTuple`'s Allocate waits for an answer asked less than `patience` ago.
    func isWaiting(_ fiveTuple: FiveTuple, now: Int64) -> Bool {
        guard let entry = byFiveTuple[fiveTuple] else { return false }
        return now - entry.since < Self.patience
    }

    /// The next ticket of loop `loop`.
    mutating func nextTicket(loop: LoopIndex) -> AdmissionTicket {
        serial &+= 1
        return AdmissionTicket(loop: loop, serial: serial)
    }

    /// Whether there is room for one more (after forgetting those past `giveUp`).
    mutating func hasRoom(now: Int64) -> Bool {
        if byFiveTuple.count >= Self.backlog { sweep(now: now) }
        return byFiveTuple.count < Self.backlog
    }

    /// Holds `request` under `ticket`, replacing an earlier one of the same 5-tuple.
    mutating func hold(_ request: AllocateRequest, ticket: AdmissionTicket, now: Int64) {
        let fiveTuple = request.origin.fiveTuple
        if let earlier = byFiveTuple[fiveTuple] { byTicket[earlier.ticket] = nil }
        byFiveTuple[fiveTuple] = Entry(request: request, ticket: ticket, since: now)
        byTicket[ticket] = fiveTuple
    }

    /// The 5-tuple of the Allocate `ticket` names, while it is held.
    func fiveTuple(of ticket: AdmissionTicket) -> FiveTuple? { byTicket[ticket] }

    /// The Allocate `ticket` names, no longer held.
    mutating func take(_ ticket: AdmissionTicket) -> AllocateRequest? {
        guard let fiveTuple = byTicket.removeValue(forKey: ticket),
            let entry = byFiveTuple.removeValue(forKey: fiveTuple)
        else { return nil }
        return entry.request
    }

    /// The 5-tuples whose Allocates wait.
    var fiveTuples: [FiveTuple] { Array(byFiveTuple.keys) }

    /// Whether an Allocate of `fiveTuple` waits for its answer.
    func contains(_ fiveTuple: FiveTuple) -> Bool { byFiveTuple[fiveTuple] != nil }

    /// Forgets `fiveTuple`'s pending Allocate (its connection closed).
    mutating func forget(_ fiveTuple: FiveTuple) {
        guard let entry = byFiveTuple.removeValue(forKey: fiveTuple) else { return }
        byTicket[entry.ticket] = nil
    }

    /// Forgets Allocates whose answer is `giveUp` seconds late.
    mutating func sweep(now: Int64) {
        for (fiveTuple, entry) in byFiveTuple where now - entry.since >= Self.giveUp { forget(fiveTuple) }
    }
}
