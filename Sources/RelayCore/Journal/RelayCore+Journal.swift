import StunCodec

/// What the core tells the state journal (docs/state-journal.md): the UDP allocations whose state
/// changed since the I/O layer last asked, and those that ended. Only UDP allocations are kept:
/// a TCP, TLS or DTLS client's allocation ends with its connection (RFC 8656 §3.1), so there is
/// nothing to restore. Off (`journaling` false) it costs one test per change.
extension RelayCore {
    /// Notes that `allocation`'s journaled state changed (created, refreshed, moved, a
    /// permission or channel added, a relayed address ended).
    @inline(__always)
    func journalChanged(_ allocation: Allocation) {
        guard journaling, allocation.origin.fiveTuple.transport == .udp else { return }
        journal.changed[ObjectIdentifier(allocation)] = allocation
    }

    /// Notes that `allocation` ended.
    func journalEnded(_ allocation: Allocation) {
        guard journaling, allocation.origin.fiveTuple.transport == .udp else { return }
        journal.changed[ObjectIdentifier(allocation)] = nil
        journal.ended.append(allocation.sessionID)
    }

    /// Notes an EVEN-PORT reservation made (RFC 8656 §7.2), or ended: taken by an Allocate, or
    /// expired.
    func journalReserved(_ token: UInt64, _ entry: ReservationTable.Entry) {
        guard journaling else { return }
        journal.reservations.append(
            .reservation(
                token: token,
                JournalReservation(address: TransportAddress(ip: entry.address, port: entry.port), expiresAt: entry.expiry)))
    }

    func journalReservationEnded(_ token: UInt64) {
        guard journaling else { return }
        journal.reservations.append(.reservationEnded(token: token))
    }

    /// Whether the journal has records to take.
    public var hasJournalChanges: Bool {
        !journal.changed.isEmpty || !journal.ended.isEmpty || !journal.reservations.isEmpty
    }

    /// Appends the records of what changed since the last call (the ended first, then each
    /// changed allocation whole) to `records`, and forgets them.
    public func takeJournalRecords(into records: inout [JournalRecord]) {
        assertOwned()
        records += journal.reservations
        for session in journal.ended { records.append(.allocationEnded(sessionID: session)) }
        for allocation in journal.changed.values {
            let response = keptAllocateResponse(of: allocation)
            records.append(.allocation(JournalAllocation(allocation, allocateResponse: response)))
        }
        journal.reservations.removeAll(keepingCapacity: true)
        journal.ended.removeAll(keepingCapacity: true)
        journal.changed.removeAll(keepingCapacity: true)
    }

    /// Every live UDP allocation of this core, for a compacted journal; what was pending is
    /// included, so it is forgotten.
    public func journalAllocations() -> [UInt64: JournalAllocation] {
        assertOwned()
        journal.ended.removeAll(keepingCapacity: true)
        journal.changed.removeAll(keepingCapacity: true)
        journal.reservations.removeAll(keepingCapacity: true)
        var all: [UInt64: JournalAllocation] = [:]
        for allocation in table.all where allocation.origin.fiveTuple.transport == .udp {
            all[allocation.sessionID] = JournalAllocation(
                allocation, allocateResponse: keptAllocateResponse(of: allocation))
        }
        return all
    }
}

/// The journal's bookkeeping inside a core.
struct JournalChanges {
    var changed: [ObjectIdentifier: Allocation] = [:]
    var ended: [UInt64] = []
    /// Reservation records, in the order they happened.
    var reservations: [JournalRecord] = []
}

extension JournalAllocation {
    /// `allocation` as the journal keeps it: expiries in the core's clock (CLOCK_BOOTTIME seconds).
    init(_ allocation: Allocation, allocateResponse: [UInt8]) {
        self.init(
            sessionID: allocation.sessionID, fiveTuple: allocation.origin.fiveTuple,
            main: Relay(address: allocation.relayedAddress, expiresAt: allocation.expiry),
            additional: allocation.additional.map { Relay(address: $0.relayedAddress, expiresAt: $0.expiry) },
            username: allocation.username, user: allocation.lease.user, key: allocation.key,
            credentials: allocation.credentials, transactionID: allocation.allocateTransactionID,
            allocateResponse: allocateResponse,
            permissions: allocation.permissions.map { Permission(peer: $0.peer, expiresAt: $0.expiry) },
            channels: allocation.channels.map { Channel(number: $0.number, peer: $0.peer, expiresAt: $0.expiry) },
            dontFragment: allocation.dontFragment, bytesPerSecond: allocation.lease.bytesPerSecond,
            mobile: allocation.mobile, moves: allocation.moves)
    }
}
