import RelayCore
import StunCodec

// Used by journal-fuzz (FuzzJournal/) and by the corpus replay in JournalFuzzRegressionTests.
/// A journal-fuzz input (docs/state-journal.md) as the journal it stands for and the reader's
/// `now`. The first byte holds the mode in bit 0 and the clock in bits 1–7: the reader reads at
/// `baseNow + 37 × (byte >> 1)` seconds, so the same records meet a reader before, during and
/// after their lifetimes.
///
/// - mode 0, raw: the bytes after the first are the journal as it is, header and all.
/// - mode 1, framed: a header for `bootID`, then one frame per `type, 16-bit length, payload`
///   triple, with its length and CRC-32 made good (a length past the end takes what is left),
///   so the fuzzer's mutations reach the record decoders instead of failing a CRC.
///
/// FuzzJournal/corpus/make_corpus.py writes the seeds in this form.
public struct JournalFuzzInput {
    public static let bootID = BootID(high: 0x6A6F_7572_6E61_6C2D, low: 0x6675_7A7A_2D62_6F6F)
    public static let baseNow: Int64 = 1_000_000
    /// RFC 8656's lifetimes (§7.2: 3,600 s at most, §9: 300 s, §12: 600 s), at most 32 permissions.
    public static let bounds = JournalBounds()

    public let journal: [UInt8]
    public let now: Int64
    public let framed: Bool

    public init(_ input: UnsafeRawBufferPointer) {
        guard let first = input.first else {
            self.init(journal: [], now: Self.baseNow, framed: false)
            return
        }
        let now = Self.baseNow + 37 * Int64(first >> 1)
        let rest = UnsafeRawBufferPointer(rebasing: input[1...])
        if first & 1 == 0 {
            self.init(journal: Array(rest), now: now, framed: false)
        } else {
            self.init(journal: Self.frame(rest), now: now, framed: true)
        }
    }

    init(journal: [UInt8], now: Int64, framed: Bool) {
        self.journal = journal
        self.now = now
        self.framed = framed
    }

    /// The header, then each `type, length, payload` triple of `triples` framed as a writer frames it.
    static func frame(_ triples: UnsafeRawBufferPointer) -> [UInt8] {
        var journal = JournalWriter.header(bootID: bootID)
        var offset = 0
        while offset < triples.count {
            let type = triples[offset]
            let declared = offset + 3 <= triples.count ? Int(triples[offset + 1]) << 8 | Int(triples[offset + 2]) : 0
            let start = min(offset + 3, triples.count)
            let end = min(start + declared, triples.count)
            let frameStart = journal.count
            journal.append(type)
            let length = UInt32(end - start)
            for shift in stride(from: 24, through: 0, by: -8) {
                journal.append(UInt8(truncatingIfNeeded: length >> UInt32(shift)))
            }
            journal += triples[start..<end]
            let crc = journal[frameStart...].withUnsafeBytes { CRC32.checksum($0) }
            for shift in stride(from: 24, through: 0, by: -8) {
                journal.append(UInt8(truncatingIfNeeded: crc >> UInt32(shift)))
            }
            offset = end
        }
        return journal
    }
}
