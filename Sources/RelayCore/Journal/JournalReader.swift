import StunCodec

/// Reads a journal back (docs/state-journal.md, "Reading"): the state its records leave, kept to
/// what is live at `now` and within `bounds`.
///
/// It never reads past the buffer, never traps on what the buffer holds, and allocates in
/// proportion to the buffer at most: every count and length is checked against the bytes left
/// before anything is reserved for it. A damaged header refuses the whole journal. The records
/// are read up to the first frame that is cut short or whose CRC-32 fails, and none after it,
/// since its length cannot be trusted to find the next one: the state recovered is always the
/// state after some whole prefix of the records, never a mix with one missing in between.
public enum JournalReader {
    public static func read(_ journal: [UInt8], bootID: BootID, now: Int64, bounds: JournalBounds)
        throws(JournalHeaderError) -> JournalRecovery
    {
        let result = journal.withUnsafeBytes { bytes in
            Result { () throws(JournalHeaderError) in try read(bytes, bootID: bootID, now: now, bounds: bounds) }
        }
        return try result.get()
    }

    public static func read(_ journal: UnsafeRawBufferPointer, bootID: BootID, now: Int64, bounds: JournalBounds)
        throws(JournalHeaderError) -> JournalRecovery
    {
        try JournalHeader.check(journal, bootID: bootID)
        var recovery = JournalRecovery(validBytes: JournalFormat.headerBytes)
        var pending = JournalPendingState()
        var offset = JournalFormat.headerBytes
        while offset < journal.count {
            let frame: UnsafeRawBufferPointer
            switch nextFrame(journal, at: offset) {
            case .stop(let tail):
                recovery.tail = tail
                return pending.settle(into: recovery, now: now, bounds: bounds)
            case .frame(let whole):
                frame = whole
            }
            offset += frame.count
            recovery.records += 1
            recovery.validBytes = offset
            guard let type = JournalFormat.RecordType(rawValue: frame[0]) else {
                recovery.drop(.unknownRecordType)
                continue
            }
            let payload = UnsafeRawBufferPointer(rebasing: frame[5..<frame.count - 4])
            do throws(JournalRefusal) {
                let (record, writtenAt) = try JournalRecord.decode(type, payload: payload, bounds: bounds)
                pending.apply(record, writtenAt: writtenAt)
            } catch {
                recovery.drop(error.reason)
                pending.refused(type, payload: payload)
            }
        }
        return pending.settle(into: recovery, now: now, bounds: bounds)
    }

    private enum FrameRead {
        case frame(UnsafeRawBufferPointer)
        case stop(JournalTail)
    }

    /// The whole frame at `offset`, or why there is none.
    private static func nextFrame(_ journal: UnsafeRawBufferPointer, at offset: Int) -> FrameRead {
        let left = journal.count - offset
        guard left >= 5 else { return .stop(.truncated) }
        let length = journal[offset + 1..<offset + 5].reduce(0) { $0 << 8 | Int($1) }
        guard length <= JournalFormat.maxPayloadBytes else { return .stop(.oversizedRecord) }
        let total = length + JournalFormat.frameOverhead
        guard total <= left else { return .stop(.truncated) }
        let frame = UnsafeRawBufferPointer(rebasing: journal[offset..<offset + total])
        let crc = frame[total - 4..<total].reduce(0) { $0 << 8 | UInt32($1) }
        guard crc == CRC32.checksum(UnsafeRawBufferPointer(rebasing: frame[0..<total - 4])) else {
            return .stop(.checksumMismatch)
        }
        return .frame(frame)
    }
}
