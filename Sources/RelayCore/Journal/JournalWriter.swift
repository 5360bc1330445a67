import StunCodec

/// Writes journals (docs/state-journal.md): a header, then records appended as the state
/// changes, or a whole state at once (`compacted`) when the file is rewritten or a live upgrade
/// hands its state over. Bytes only: where they go (a file in `state-dir`, a socket) is the
/// caller's. Each record is read back before it is appended, so the writer never writes one a
/// reader would refuse.
public enum JournalWriter {
    /// A journal's first bytes: the header, for the boot `bootID`.
    public static func header(bootID: BootID) -> [UInt8] { JournalHeader.encode(bootID: bootID) }

    /// Appends `record` as one frame to `journal`, its time of writing `now` (`CLOCK_BOOTTIME`
    /// seconds). Throws, leaving `journal` as it was, when the record does not fit the format.
    /// `verify` false skips reading the record back: for a running relayd's own allocations,
    /// valid by construction, on the path every Allocate takes (a record a reader would refuse
    /// is dropped and counted there, never fatal).
    public static func append(
        _ record: JournalRecord, now: Int64, to journal: inout [UInt8], verify: Bool = true,
        bounds: JournalBounds = .format
    ) throws(JournalEncodingError) {
        journal += try frame(record, now: now, verify: verify, bounds: bounds)
    }

    /// One record's frame: type, payload length, payload, CRC-32.
    /// `bounds`: what the record is read back with (the format's own limits).
    public static func frame(
        _ record: JournalRecord, now: Int64, verify: Bool = true, bounds: JournalBounds = .format
    ) throws(JournalEncodingError) -> [UInt8] {
        var out = JournalOutput()
        out.u8(record.type.rawValue)
        out.u32(0)
        try record.encodePayload(writtenAt: now, into: &out)
        let payloadBytes = out.bytes.count - 5
        guard payloadBytes <= JournalFormat.maxPayloadBytes else { throw .tooLong("record") }
        let refusal = !verify ? nil : out.bytes.withUnsafeBytes { frame -> JournalDropReason? in
            let payload = UnsafeRawBufferPointer(rebasing: frame[5...])
            do throws(JournalRefusal) {
                _ = try JournalRecord.decode(record.type, payload: payload, bounds: bounds)
                return nil
            } catch {
                return error.reason
            }
        }
        if let refusal { throw .unreadable(refusal) }
        for i in 0..<4 { out.bytes[1 + i] = UInt8(truncatingIfNeeded: UInt32(payloadBytes) >> UInt32(24 - 8 * i)) }
        out.u32(out.bytes.withUnsafeBytes { CRC32.checksum($0) })
        return out.bytes
    }

    /// `state` as a fresh journal: the header, the keys, then reservations and allocations in
    /// the order of their ids, each written at `now`. Reading it back at `now` gives `state`
    /// (allocations are keyed by their session id, as the reader keys them). `streamClients`:
    /// TCP and TLS clients' allocations are written too, for a live upgrade's snapshot
    /// (`JournalBounds.streamClients`).
    public static func compacted(_ state: JournalState, bootID: BootID, now: Int64, streamClients: Bool = false)
        throws(JournalEncodingError) -> [UInt8]
    {
        var bounds = JournalBounds.format
        bounds.streamClients = streamClients
        var journal = header(bootID: bootID)
        if !state.keys.isEmpty { try append(.keys(state.keys), now: now, to: &journal) }
        for (token, reservation) in state.reservations.sorted(by: { $0.key < $1.key }) {
            try append(.reservation(token: token, reservation), now: now, to: &journal)
        }
        for (_, allocation) in state.allocations.sorted(by: { $0.key < $1.key }) {
            try append(.allocation(allocation), now: now, to: &journal, bounds: bounds)
        }
        return journal
    }
}
