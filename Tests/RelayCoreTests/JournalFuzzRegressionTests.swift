import CoreFuzzing
import RelayCore
import StunCodec
import Testing

/// journal-fuzz's corpus as a regression suite: every file in FuzzJournal/corpus/journal (seeds
/// and committed crash inputs) replayed through the same input decoder and invariants as the
/// fuzzer (JournalFuzzSession.swift), without sanitizers. The seeds are written by
/// FuzzJournal/corpus/make_corpus.py from docs/state-journal.md alone, so they also hold the
/// Swift writer to the page.
@Suite struct JournalFuzzRegressionTests {
    static let root = String(#filePath).split(separator: "/", omittingEmptySubsequences: false).dropLast(3)
        .joined(separator: "/")
    static let corpus = root + "/FuzzJournal/corpus/journal"

    static var inputs: [String] {
        InputFiles.list(corpus).filter { $0.hasPrefix(corpus + "/") }.map { String($0.dropFirst(corpus.count + 1)) }
    }

    static func read(_ name: String) throws -> [UInt8] {
        guard let bytes = InputFiles.read(corpus + "/" + name) else { throw Unreadable(path: corpus + "/" + name) }
        return bytes
    }

    struct Unreadable: Error { var path: String }

    static func recover(_ name: String) throws -> Result<JournalRecovery, JournalHeaderError> {
        try read(name).withUnsafeBytes { JournalFuzzSession().recover($0) }
    }

    @Test("The corpus is there") func corpusPresent() {
        #expect(Self.inputs.count >= 7, "FuzzJournal/corpus/journal holds \(Self.inputs.count) files")
    }

    @Test("Every corpus input keeps the reader's invariants", arguments: inputs)
    func replay(name: String) throws {
        let failures = try Self.read(name).withUnsafeBytes { JournalFuzzSession().run($0) }
        #expect(failures.isEmpty, "\(name): \(failures)")
    }

    @Test("The Python seed is byte for byte what JournalWriter writes for the same records")
    func seedMatchesWriter() throws {
        let written = JournalFuzzInput.baseNow - 10
        var journal = JournalWriter.header(bootID: JournalFuzzInput.bootID)
        let records: [JournalRecord] = [
            .keys(JournalFixture.keys), .allocation(JournalFixture.dual(written: written)),
            .allocation(JournalFixture.plain(written: written)),
            .reservation(token: 99, JournalFixture.reservation(written: written)), .allocationEnded(sessionID: 0x2222),
            .reservationEnded(token: 99),
        ]
        for record in records { try JournalWriter.append(record, now: written, to: &journal) }
        #expect(try Self.read("seed-raw-rich") == [0] + journal)
    }

    @Test("The seeds reach the paths they are named for")
    func seedsReachTheirPaths() throws {
        let rich = try Self.recover("seed-raw-rich").get()
        #expect(Set(rich.state.allocations.keys) == [0x1111] && rich.state.keys.count == 3 && rich.drops.isEmpty)
        let torn = try Self.recover("seed-raw-torn").get()
        #expect(torn.tail == .truncated && torn.state.reservations.keys.contains(99))
        let expired = try Self.recover("seed-raw-expired").get()
        #expect(expired.state.allocations.isEmpty && expired.dropped(.allocationExpired) == 1)
        #expect(try Self.recover("seed-raw-version-2") == .failure(.unsupportedVersion(2)))
        #expect(try Self.recover("seed-raw-other-boot") == .failure(.otherBoot))
        let framed = try Self.recover("seed-framed-records").get()
        #expect(Set(framed.state.allocations.keys) == [0x1111] && framed.state.reservations.keys.contains(7))
        let refusals = try Self.recover("seed-framed-refusals").get()
        #expect(refusals.state.allocations.isEmpty)
        #expect(
            refusals.drops == [
                .notUDP: 1, .malformed: 2, .unknownRecordType: 1, .allocationLifetimeTooLong: 1, .writtenAfterNow: 1,
            ])
    }
}
