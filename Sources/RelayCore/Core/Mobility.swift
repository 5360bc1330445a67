import StunCodec

/// Mobility's decisions on one loop thread (RFC 8016), apart from their effects: whether an
/// Allocate may have a ticket, each ticket's nonce, where a Refresh with a ticket goes, whether
/// it may move the allocation, and from which socket a moved client is answered.
///
/// It reads values and returns values: `RelayCore+Mobility.swift` authenticates, answers, counts,
/// emits the commands and moves the allocation in the `AllocationTable` (which indexes mobile
/// allocations by session). What the loops share, the ticket keys and which loop holds each
/// session, is `MobilityTickets` in `NodeTables` (docs/mobility.md).
struct Mobility {
    /// Tickets this loop thread sealed; with the thread's index, it makes each ticket's nonce
    /// (`nonce(thread:)`).
    private(set) var ticketsSealed: UInt64 = 0

    /// What MOBILITY-TICKET in an Allocate asks (RFC 8016 §3.1.2), from the attribute's length
    /// (nil: absent): false when absent; true when it asks for mobility and may have it; else
    /// the error to answer: 405 when mobility is off or the client is not on UDP (§3.4), 400
    /// when the attribute is not empty.
    static func requested(ticketLength: Int?, enabled: Bool, transport: TransportProtocol) -> Result<Bool, RelayError> {
        guard let ticketLength else { return .success(false) }
        guard enabled, transport == .udp else { return .failure(.mobilityForbidden) }
        guard ticketLength == 0 else { return .failure(.badRequest) }
        return .success(true)
    }

    /// The nonce of the next ticket loop thread `thread` seals: the thread's index in byte 0,
    /// the count of tickets it sealed in bytes 4-11. Never repeated under one key: the threads
    /// differ in their index, one thread's tickets in their count (RFC 8016 §3.3 leaves the
    /// ticket's form to the server; docs/mobility.md, "Tickets").
    mutating func nonce(thread: Int) -> [UInt8] {
        ticketsSealed &+= 1
        var nonce = [UInt8](repeating: 0, count: SealedBox.nonceLength)
        nonce[0] = UInt8(truncatingIfNeeded: thread)
        for i in 0..<8 { nonce[4 + i] = UInt8(truncatingIfNeeded: ticketsSealed >> UInt64(56 - 8 * i)) }
        return nonce
    }

    /// The ticket of `session` after `serial` moves (RFC 8016 §3.1.2, §3.2.2), sealed under
    /// `keys`' current key with the next nonce of thread `thread`.
    mutating func ticket(session: UInt64, serial: UInt32, thread: Int, keys: MobilityTickets) -> MobilityTicket? {
        keys.seal(session: session, serial: serial, nonce: nonce(thread: thread)).map { MobilityTicket(bytes: $0) }
    }

    /// Where a Refresh with MOBILITY-TICKET from a 5-tuple without an allocation goes (RFC 8016
    /// §3.2.2), from what its ticket opened to (nil: mobility is off, or the ticket cannot be
    /// read) and the loop thread that holds that session (nil: its allocation ended).
    static func route(
        opened: (session: UInt64, serial: UInt32)?, owner: Int?, enabled: Bool, thread: Int,
        transport: TransportProtocol
    ) -> MobileRefreshRoute {
        guard let opened, let owner else {
            // 405 with mobility off; 400 for a ticket this process cannot read (forged, altered,
            // sealed before the last two keys); 437 for one whose allocation ended.
            let error: RelayError = !enabled ? .mobilityForbidden : opened == nil ? .badRequest : .allocationMismatch
            return .refuse(MobilityRefusal(error: error, counted: .refused))
        }
        guard owner == thread else {
            // Only UDP moves: a stream client's connection lives on this thread, so its answer
            // could not come from the owner's.
            guard transport == .udp else { return .refuse(MobilityRefusal(error: .mobilityForbidden, counted: nil)) }
            return .forward(LoopIndex(owner))
        }
        return .local(session: opened.session, serial: opened.serial)
    }

    /// Whether a Refresh whose ticket carries `serial` may move an allocation that moved `moves`
    /// times (RFC 8016 §3.2.2), once it authenticated as the allocation's user: nil when it
    /// may. Only the current ticket moves it (an older one was used: 400), only over UDP (405),
    /// only to a 5-tuple without an allocation of its own (437), and only when the allocation
    /// has the family REQUESTED-ADDRESS-FAMILY names, if any (443, RFC 8656 §8.1), so nothing
    /// moves that the Refresh would then refuse.
    static func refusal(
        serial: UInt32, moves: UInt32, transport: TransportProtocol, destinationFree: Bool, servesFamily: Bool
    ) -> MobilityRefusal? {
        guard serial == moves else { return MobilityRefusal(error: .badRequest, counted: .refused) }
        guard transport == .udp else { return MobilityRefusal(error: .mobilityForbidden, counted: nil) }
        guard destinationFree else { return MobilityRefusal(error: .allocationMismatch, counted: nil) }
        guard servesFamily else { return MobilityRefusal(error: .peerAddressFamilyMismatch, counted: nil) }
        return nil
    }

    /// The origin a client that moved to `origin` is answered from (RFC 8016 §3.2.2): this
    /// thread's own UDP listener on the same server address, never the socket the request came
    /// in on (the steered socket of an earlier move, or another thread's listener).
    static func movedOrigin(_ origin: ClientOrigin, listeners: [(address: TransportAddress, socket: ClientSocket)])
        -> ClientOrigin
    {
        let listener = listeners.first { $0.address == origin.fiveTuple.server }?.socket ?? origin.socket
        return ClientOrigin(fiveTuple: origin.fiveTuple, socket: listener)
    }

    /// Whether the I/O layer holds a socket of its own for a mobile allocation's client, to be
    /// closed when the allocation ends: one is opened at every move, so from the first move on
    /// (docs/mobility.md, "Threads").
    static func hasSteeredSocket(moves: UInt32) -> Bool { moves > 0 }
}

/// A mobility request refused with `error`, after authentication (RFC 8016 §3.2.2); `counted`
/// is the outcome it adds to, if any.
struct MobilityRefusal: Equatable {
    let error: RelayError
    let counted: MobilityOutcome?
}

/// Where a Refresh with MOBILITY-TICKET from an unknown 5-tuple goes (RFC 8016 §3.2.2).
enum MobileRefreshRoute: Equatable {
    /// Answered here with an error, after authentication.
    case refuse(MobilityRefusal)
    /// Another loop thread holds the allocation: the request goes to it (`forwardRequest`).
    case forward(LoopIndex)
    /// This thread holds `session`: the allocation moves if `serial` is its current one.
    case local(session: UInt64, serial: UInt32)
}
