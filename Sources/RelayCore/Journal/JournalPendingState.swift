/// The records applied so far, with the time each allocation and reservation was written; what
/// the reader settles against `now` and the bounds once it has read them all.
struct JournalPendingState {
    var allocations: [UInt64: (allocation: JournalAllocation, writtenAt: Int64)] = [:]
    var keys: [JournalKey] = []
    var reservations: [UInt64: (reservation: JournalReservation, writtenAt: Int64)] = [:]

    mutating func apply(_ record: JournalRecord, writtenAt: Int64) {
        switch record {
        case .allocation(let allocation): allocations[allocation.sessionID] = (allocation, writtenAt)
        case .allocationEnded(let id): allocations[id] = nil
        case .keys(let keys): self.keys = keys
        case .reservation(let token, let reservation): reservations[token] = (reservation, writtenAt)
        case .reservationEnded(let token): reservations[token] = nil
        }
    }

    /// A refused allocation or reservation record was written to replace the one with its id
    /// (its first 8 bytes), which is stale now: that one goes too.
    mutating func refused(_ type: JournalFormat.RecordType, payload: UnsafeRawBufferPointer) {
        guard type == .allocation || type == .reservation, payload.count >= 8 else { return }
        let id = payload[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
        if type == .allocation { allocations[id] = nil } else { reservations[id] = nil }
    }

    /// `recovery` with the state that is live at `now` and within `bounds`: a record written
    /// after `now` is dropped, and so is a lifetime longer than its bound from when it was
    /// written (RFC 8656 §7.2 for allocations, §9 permissions, §12 channels) before one that has
    /// run out. An allocation goes with either relayed address; a permission or channel alone.
    func settle(into recovery: JournalRecovery, now: Int64, bounds: JournalBounds) -> JournalRecovery {
        var recovery = recovery
        recovery.state.keys = keys
        for (token, entry) in reservations {
            let check = Lifetime.check(
                entry.reservation.expiresAt, written: entry.writtenAt, now: now, bound: bounds.reservationLifetime)
            switch check {
            case .writtenAfterNow: recovery.drop(.writtenAfterNow)
            case .tooLong: recovery.drop(.reservationLifetimeTooLong)
            case .expired: recovery.drop(.reservationExpired)
            case .live: recovery.state.reservations[token] = entry.reservation
            }
        }
        for (id, entry) in allocations {
            if let allocation = settle(entry.allocation, written: entry.writtenAt, now: now, bounds: bounds, &recovery)
            {
                recovery.state.allocations[id] = allocation
            }
        }
        return recovery
    }

    private func settle(
        _ allocation: JournalAllocation, written: Int64, now: Int64, bounds: JournalBounds,
        _ recovery: inout JournalRecovery
    ) -> JournalAllocation? {
        let relays = [allocation.main] + (allocation.additional.map { [$0] } ?? [])
        let checks = relays.map {
            Lifetime.check($0.expiresAt, written: written, now: now, bound: bounds.allocationLifetime)
        }
        if checks.contains(.writtenAfterNow) {
            recovery.drop(.writtenAfterNow)
            return nil
        }
        if checks.contains(.tooLong) {
            recovery.drop(.allocationLifetimeTooLong)
            return nil
        }
        if checks.contains(.expired) {
            recovery.drop(.allocationExpired)
            return nil
        }
        var kept = allocation
        kept.permissions = allocation.permissions.filter { permission in
            switch Lifetime.check(permission.expiresAt, written: written, now: now, bound: bounds.permissionLifetime) {
            case .live: return true
            case .tooLong: recovery.drop(.permissionLifetimeTooLong)
            case .expired, .writtenAfterNow: recovery.drop(.permissionExpired)
            }
            return false
        }
        kept.channels = allocation.channels.filter { channel in
            switch Lifetime.check(channel.expiresAt, written: written, now: now, bound: bounds.channelLifetime) {
            case .live: return true
            case .tooLong: recovery.drop(.channelLifetimeTooLong)
            case .expired, .writtenAfterNow: recovery.drop(.channelExpired)
            }
            return false
        }
        return kept
    }
}

/// One lifetime against the reader's clock: "never trust a lifetime it cannot verify".
private enum Lifetime {
    case live
    case writtenAfterNow
    case tooLong
    case expired

    /// `expiresAt` and `written` are never negative (`JournalCursor.time`), so their difference
    /// cannot overflow; `now` is the caller's and is compared, never subtracted.
    static func check(_ expiresAt: Int64, written: Int64, now: Int64, bound: Int64) -> Lifetime {
        if written > now { return .writtenAfterNow }
        if expiresAt - written > bound { return .tooLong }
        if expiresAt <= now { return .expired }
        return .live
    }
}
