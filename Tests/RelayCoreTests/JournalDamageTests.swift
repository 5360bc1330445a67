import RelayCore
import StunCodec
import Testing

/// A journal damaged as a crash or a bad disk damages it (docs/state-journal.md, "Reading"): cut
/// short anywhere, or any byte changed. The reader never traps, and what it recovers is the state
/// after a whole prefix of the records, or a typed refusal of the header.
@Suite struct JournalDamageTests {
    typealias F = JournalFixture

    @Test("Cut at every byte offset: a header error before 30 bytes, else the records whole before the cut")
    func cutEverywhere() throws {
        let (journal, ends) = try F.scriptJournal()
        for cut in 0...journal.count {
            let bytes = Array(journal.prefix(cut))
            guard cut >= JournalFormat.headerBytes else {
                #expect(throws: JournalHeaderError.truncated) { try F.read(bytes) }
                continue
            }
            let recovery = try F.read(bytes)
            let whole = ends.filter { $0 <= cut }
            #expect(recovery.state == F.state(afterRecords: whole.count), "cut at \(cut)")
            #expect(recovery.records == whole.count)
            #expect(recovery.validBytes == whole.last ?? JournalFormat.headerBytes)
            #expect(recovery.tail == (recovery.validBytes == cut ? nil : .truncated), "cut at \(cut)")
            #expect(recovery.drops.isEmpty)
        }
    }

    @Test(
        "Every byte changed, one at a time: the header refused, or the records before the damaged one",
        arguments: [0x01, 0xFF] as [UInt8])
    func everyByteChanged(mask: UInt8) throws {
        let (journal, ends) = try F.scriptJournal()
        for offset in journal.indices {
            var bytes = journal
            bytes[offset] ^= mask
            guard offset >= JournalFormat.headerBytes else {
                let expected = Self.headerError(changing: offset, mask: mask)
                #expect(throws: expected) { try F.read(bytes) }
                continue
            }
            let recovery = try F.read(bytes)
            // The damaged frame is the first whose end lies past the changed byte.
            let before = ends.filter { $0 <= offset }
            #expect(recovery.state == F.state(afterRecords: before.count), "byte \(offset)")
            #expect(recovery.validBytes == before.last ?? JournalFormat.headerBytes, "byte \(offset)")
            #expect(recovery.tail != nil, "byte \(offset)")
        }
    }

    /// Magic bytes changed: not a journal; version bytes: another version; the rest: its CRC.
    static func headerError(changing offset: Int, mask: UInt8) -> JournalHeaderError {
        switch offset {
        case 0..<8: return .badMagic
        case 8: return .unsupportedVersion(JournalFormat.version ^ UInt16(mask) << 8)
        case 9: return .unsupportedVersion(JournalFormat.version ^ UInt16(mask))
        default: return .badChecksum
        }
    }

    @Test("A tail of zeros (a file extended but never written) is a damaged frame, not a record")
    func zeroTail() throws {
        let (journal, ends) = try F.scriptJournal()
        let recovery = try F.read(journal + Array(repeating: 0, count: 64))
        #expect(recovery.state == F.state(afterRecords: F.script.count))
        #expect(recovery.validBytes == ends.last)
        #expect(recovery.tail == .checksumMismatch)
    }

    @Test("A frame announcing more than 4 MiB stops the reading, without reserving anything for it")
    func oversizedLength() throws {
        var journal = JournalWriter.header(bootID: F.boot)
        try JournalWriter.append(.keys(F.keys), now: F.written, to: &journal)
        let recovery = try F.read(journal + [JournalFormat.RecordType.allocation.rawValue, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(recovery.state.keys == F.keys)
        #expect(recovery.tail == .oversizedRecord)
    }

    @Test("The header refused: not a journal, another version, damaged, another boot, cut short")
    func headerErrors() throws {
        let journal = try JournalWriter.compacted(JournalState(keys: F.keys), bootID: F.boot, now: F.written)
        var wrongMagic = journal
        wrongMagic[1] = UInt8(ascii: "X")
        #expect(throws: JournalHeaderError.badMagic) { try F.read(wrongMagic) }
        #expect(throws: JournalHeaderError.badMagic) { try F.read(Array("hello".utf8)) }
        var version2 = journal
        version2[9] = 2
        #expect(throws: JournalHeaderError.unsupportedVersion(2)) { try F.read(version2) }
        var damaged = journal
        damaged[20] ^= 0x10
        #expect(throws: JournalHeaderError.badChecksum) { try F.read(damaged) }
        #expect(throws: JournalHeaderError.otherBoot) {
            try JournalReader.read(journal, bootID: F.otherBoot, now: F.now, bounds: F.bounds)
        }
        #expect(throws: JournalHeaderError.truncated) { try F.read([]) }
        #expect(throws: JournalHeaderError.truncated) { try F.read(Array(journal.prefix(29))) }
    }
}
