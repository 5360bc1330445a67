/// A record's type byte and payload (docs/state-journal.md, "Records"). Allocation and
/// reservation records carry the time they were written, which the reader checks their
/// lifetimes against.
extension JournalRecord {
    var type: JournalFormat.RecordType {
        switch self {
        case .allocation: return .allocation
        case .allocationEnded: return .allocationEnded
        case .keys: return .keys
        case .reservation: return .reservation
        case .reservationEnded: return .reservationEnded
        }
    }

    func encodePayload(writtenAt: Int64, into out: inout JournalOutput) throws(JournalEncodingError) {
        switch self {
        case .allocation(let allocation): try allocation.encode(writtenAt: writtenAt, into: &out)
        case .allocationEnded(let id): out.u64(id)
        case .keys(let keys): try JournalKey.encode(keys, into: &out)
        case .reservation(let token, let reservation):
            try reservation.encode(token: token, writtenAt: writtenAt, into: &out)
        case .reservationEnded(let token): out.u64(token)
        }
    }

    /// The record in `payload`, and when it was written (0 for the records without a time).
    static func decode(_ type: JournalFormat.RecordType, payload: UnsafeRawBufferPointer, bounds: JournalBounds)
        throws(JournalRefusal) -> (record: JournalRecord, writtenAt: Int64)
    {
        var cursor = JournalCursor(payload)
        switch type {
        case .allocation:
            let (allocation, writtenAt) = try JournalAllocation.decode(&cursor, bounds: bounds)
            return (.allocation(allocation), writtenAt)
        case .allocationEnded:
            let id = try cursor.u64()
            try cursor.end()
            return (.allocationEnded(sessionID: id), 0)
        case .keys:
            return (.keys(try JournalKey.decode(&cursor)), 0)
        case .reservation:
            let (token, reservation, writtenAt) = try JournalReservation.decode(&cursor)
            return (.reservation(token: token, reservation), writtenAt)
        case .reservationEnded:
            let token = try cursor.u64()
            try cursor.end()
            return (.reservationEnded(token: token), 0)
        }
    }
}
