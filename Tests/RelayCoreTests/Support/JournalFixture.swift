import RelayCore
import StunCodec

@testable import CoreTestSupport

/// Journals for the state journal's tests (docs/state-journal.md): a boot, a reader's `now`,
/// RFC 8656's lifetimes, a dual-stack allocation with permissions and channels, and a script of
/// records whose every prefix has a known state.
enum JournalFixture {
    static let boot = BootID(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
    static let otherBoot = BootID(high: 1, low: 2)
    /// The reader's `CLOCK_BOOTTIME` second, and when the records were written (10 s before).
    static let now: Int64 = 86_400
    static let written = now - 10
    static let bounds = JournalBounds()

    static let keys = [
        JournalKey(name: "nonce", bytes: Array(0..<32)),
        JournalKey(name: "mobility-ticket", bytes: Array(repeating: 0xA5, count: 48)),
        JournalKey(name: "dtls-cookie", bytes: [1, 2, 3]),
    ]

    // FuzzJournal/corpus/make_corpus.py writes dual(), plain() and keys too, byte for byte.

    /// A dual allocation (RFC 8656 §7.2): IPv4 and IPv6 relayed addresses, a SHA-256 key, two
    /// permissions and two channels, DONT-FRAGMENT, a bandwidth lease, mobile with a move.
    static func dual(_ id: UInt64 = 0x1111, written: Int64 = written) -> JournalAllocation {
        JournalAllocation(
            sessionID: id,
            fiveTuple: FiveTuple(
                client: .literal("192.0.2.1:40001"), server: .literal("10.0.0.5:3478"), transport: .udp),
            main: .init(address: .literal("10.0.0.5:50001"), expiresAt: written + 600),
            additional: .init(address: .literal("[2001:db8::5]:50002"), expiresAt: written + 600),
            username: "1700003600:alice", user: "alice", key: Array(0..<32),
            credentials: CredentialAlgorithms(passwordAlgorithm: .sha256, integritySHA256: true),
            transactionID: TransactionID(high: 0xDEAD_BEEF, low: 0x0102_0304_0506_0708),
            allocateResponse: Array(repeating: 0x42, count: 120),
            permissions: [
                .init(peer: .literal("1.2.3.4"), expiresAt: written + 300),
                .init(peer: .literal("2001:db8::99"), expiresAt: written + 250),
            ],
            channels: [
                .init(number: 0x4000, peer: .literal("1.2.3.4:5000"), expiresAt: written + 600),
                .init(number: 0x4FFF, peer: .literal("[2001:db8::99]:6000"), expiresAt: written + 500),
            ],
            dontFragment: true, bytesPerSecond: 125_000, mobile: true, moves: 1)
    }

    /// A plain IPv6 allocation with an MD5 key and nothing bound.
    static func plain(_ id: UInt64 = 0x2222, written: Int64 = written) -> JournalAllocation {
        JournalAllocation(
            sessionID: id,
            fiveTuple: FiveTuple(
                client: .literal("[2001:db8:1::7]:40002"), server: .literal("[2001:db8::5]:3478"), transport: .udp),
            main: .init(address: .literal("[2001:db8::5]:50003"), expiresAt: written + 3600), username: "bob",
            user: "bob", key: Array(repeating: 7, count: 16), transactionID: TransactionID(high: 1, low: 2))
    }

    /// The port after 50004, held by EVEN-PORT's R bit for 30 s (RFC 8656 §7.2).
    static func reservation(written: Int64 = written) -> JournalReservation {
        JournalReservation(address: .literal("10.0.0.5:50005"), expiresAt: written + 30)
    }

    /// Every kind of record, in an order where later ones replace and remove earlier ones.
    static var script: [JournalRecord] {
        var moved = dual()
        moved.fiveTuple.client = .literal("198.51.100.9:41000")
        moved.moves = 2
        moved.channels.removeLast()
        return [
            .keys(keys), .allocation(dual()), .allocation(plain()), .reservation(token: 99, reservation()),
            .allocation(moved), .allocationEnded(sessionID: 0x2222), .reservationEnded(token: 99),
            .allocation(plain(0x3333)), .keys([JournalKey(name: "nonce", bytes: [9])]),
        ]
    }

    /// The script as a journal, and the offset where each of its frames ends.
    static func scriptJournal() throws -> (bytes: [UInt8], ends: [Int]) {
        var journal = JournalWriter.header(bootID: boot)
        var ends: [Int] = []
        for record in script {
            try JournalWriter.append(record, now: written, to: &journal)
            ends.append(journal.count)
        }
        return (journal, ends)
    }

    /// The state after the script's first `count` records.
    static func state(afterRecords count: Int) -> JournalState {
        var state = JournalState()
        for record in script.prefix(count) { state.apply(record) }
        return state
    }

    static func read(_ journal: [UInt8], now: Int64 = now, bounds: JournalBounds = bounds) throws(JournalHeaderError)
        -> JournalRecovery
    {
        try JournalReader.read(journal, bootID: boot, now: now, bounds: bounds)
    }

    /// `journal` with its frame at `offset` rewritten by `change` (payload bytes from the frame's
    /// sixth byte on) and its CRC-32 made good again: a record a writer never wrote, framed well.
    static func rewriteFrame(_ journal: [UInt8], at offset: Int, _ change: (inout [UInt8]) -> Void) -> [UInt8] {
        let length = journal[offset + 1..<offset + 5].reduce(0) { $0 << 8 | Int($1) }
        var frame = Array(journal[offset..<offset + 5 + length])
        change(&frame)
        let crc = frame.withUnsafeBytes { CRC32.checksum($0) }
        frame += (0..<4).map { UInt8(truncatingIfNeeded: crc >> UInt32(24 - 8 * $0)) }
        return Array(journal[..<offset]) + frame + Array(journal[(offset + 9 + length)...])
    }
}
