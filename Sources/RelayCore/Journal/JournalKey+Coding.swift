/// The keys record's payload (docs/state-journal.md, "Keys record"): a count, then each key's
/// name and bytes. Names are distinct and not empty.
extension JournalKey {
    static func encode(_ keys: [JournalKey], into out: inout JournalOutput) throws(JournalEncodingError) {
        guard keys.count <= JournalFormat.maxKeys else { throw .tooLong("keys") }
        out.u8(UInt8(keys.count))
        for key in keys {
            try out.bytes(key.name.utf8, lengthBytes: 1, max: JournalFormat.maxKeyNameBytes, field: "key name")
            try out.bytes(key.bytes, lengthBytes: 2, max: JournalFormat.maxKeyBytes, field: "key bytes")
        }
    }

    static func decode(_ cursor: inout JournalCursor) throws(JournalRefusal) -> [JournalKey] {
        let count = Int(try cursor.u8())
        // Each key takes at least a 1-byte name and two length bytes.
        guard count <= JournalFormat.maxKeys, count * 4 <= cursor.remaining else { throw .malformed }
        var keys: [JournalKey] = []
        keys.reserveCapacity(count)
        var names = Set<String>(minimumCapacity: count)
        for _ in 0..<count {
            let name = try cursor.string(lengthBytes: 1, max: JournalFormat.maxKeyNameBytes)
            guard !name.isEmpty, names.insert(name).inserted else { throw .malformed }
            keys.append(JournalKey(name: name, bytes: try cursor.bytes(lengthBytes: 2, max: JournalFormat.maxKeyBytes)))
        }
        try cursor.end()
        return keys
    }
}

/// The reservation record's payload (docs/state-journal.md, "Reservation record").
extension JournalReservation {
    func encode(token: UInt64, writtenAt: Int64, into out: inout JournalOutput) throws(JournalEncodingError) {
        out.u64(token)
        try out.time(writtenAt, field: "written")
        out.transportAddress(address)
        try out.time(expiresAt, field: "reservation expiry")
    }

    static func decode(_ cursor: inout JournalCursor) throws(JournalRefusal) -> (
        token: UInt64, reservation: JournalReservation, writtenAt: Int64
    ) {
        let token = try cursor.u64()
        let writtenAt = try cursor.time()
        let reservation = JournalReservation(address: try cursor.transportAddress(), expiresAt: try cursor.time())
        try cursor.end()
        return (token, reservation, writtenAt)
    }
}
