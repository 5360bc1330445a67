import Foundation
import Logging
@testable import Relay
import RelayCore
import Testing

/// Blocks kept beyond the process (docs/admin.md, "Blocks that last"): the text form shared by
/// the `state-dir` file and Redis, the file written and read back, and a table replaced whole.
@Suite struct BlockStoreTests {
    static let logger = Logger(label: "relayd.block-tests") { _ in SwiftLogNoOpLogHandler() }

    @Test("A block's line and Redis value read back exactly, whatever the names hold")
    func roundTrip() throws {
        let entry = UserBlocklist.Entry(user: "al ice\n%x:é", until: 2_000_000_000, setBy: "ops team", setAt: 1_900_000_000)
        let line = BlockRecord.line(entry)
        #expect(line.hasSuffix("\n") && line.dropLast().allSatisfy { $0 != "\n" && $0 != "\r" })
        #expect(BlockRecord.parseLine(line.dropLast()) == entry)
        let value = BlockRecord.value(entry)
        #expect(BlockRecord.parse(user: Array(entry.user.utf8), value: value[...]) == entry)
        let unknown = UserBlocklist.Entry(user: "bob", until: 5)
        #expect(BlockRecord.parseLine(BlockRecord.line(unknown).dropLast()) == unknown)
    }

    @Test("Malformed lines and values are refused", arguments: [
        "", "1 2 bob", "1 2 bob ops extra", "x 2 bob ops", "1 x bob ops", "0 2 bob ops", "1 -1 bob ops",
        "1 2  ops", "1 2 %zz ops", "1 2 %ff ops", "1 2 bob %", "1 2 \(String(repeating: "a", count: 257)) ops",
        "1 2 bob \(String(repeating: "b", count: 129))", "99999999999999999999 2 bob ops",
    ])
    func malformedLine(line: String) {
        #expect(BlockRecord.parseLine(line[...]) == nil)
    }

    @Test("A Redis field must be a user name of 1 to 256 UTF-8 bytes, its value three fields")
    func malformedValue() {
        #expect(BlockRecord.parse(user: [], value: "1 2 ops") == nil)
        #expect(BlockRecord.parse(user: [0xff], value: "1 2 ops") == nil)
        #expect(BlockRecord.parse(user: Array(repeating: 0x61, count: 257), value: "1 2 ops") == nil)
        #expect(BlockRecord.parse(user: Array("bob".utf8), value: "1 2") == nil)
        #expect(BlockRecord.parse(user: Array("bob".utf8), value: "1 2 ops x") == nil)
        #expect(BlockRecord.parse(user: Array("bob".utf8), value: "1 2 ops")?.setBy == "ops")
    }

    @Test("The state-dir file keeps blocks across a restart: set, lifted, lapsed, damaged, refused")
    func file() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relayd-blocks-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = BlockStore(blocklist: UserBlocklist(), directory: directory, logger: Self.logger)
        var changes: [String] = []
        store.onChange = { user, entry in changes.append("\(user):\(entry == nil ? "lift" : "set")") }
        let now: Int64 = 1_000
        #expect(store.set(.init(user: "alice", until: now + 60, setBy: "ops", setAt: now), now: now))
        #expect(store.set(.init(user: "bob", until: now + 5, setBy: "ops", setAt: now), now: now))
        #expect(store.set(.init(user: "carol", until: now + 60, setBy: "ci", setAt: now), now: now))
        #expect(store.lift("carol", now: now))
        #expect(!store.lift("carol", now: now))
        #expect(changes == ["alice:set", "bob:set", "carol:set", "carol:lift"])
        let path = "\(directory)/\(BlockStore.fileName)"
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)

        // A restart: what is in force comes back, with who set it and when; bob lapsed.
        let restarted = BlockStore(blocklist: UserBlocklist(), directory: directory, logger: Self.logger)
        restarted.load(now: now + 10)
        #expect(restarted.blocklist.list(now: now + 10) == [.init(user: "alice", until: now + 60, setBy: "ops", setAt: now)])

        // A damaged line is skipped, the rest kept; a file without the header is refused whole.
        let text = try String(contentsOfFile: path, encoding: .utf8) + "garbage line\n"
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        #expect(BlockStore.parse(Array(text.utf8)).refused == 1)
        #expect(BlockStore.parse(Array(text.utf8)).entries?.map(\.user) == ["alice", "bob"])
        #expect(BlockStore.parse(Array("1 2 eve ops\n".utf8)).entries == nil)
    }

    @Test("A table replaced whole reports a change only when there is one, and stays bounded")
    func replace() {
        let blocklist = UserBlocklist()
        let a = UserBlocklist.Entry(user: "a", until: 100, setBy: "x", setAt: 1)
        #expect(blocklist.replace(with: [a, .init(user: "old", until: 5)], now: 10))
        #expect(blocklist.list(now: 10) == [a])
        #expect(!blocklist.replace(with: [a], now: 10))
        #expect(blocklist.replace(with: [], now: 10))
        #expect(!blocklist.isBlocked("a", now: 10))
        let many = (0...UserBlocklist.limit).map { UserBlocklist.Entry(user: "u\($0)", until: 100) }
        blocklist.replace(with: many, now: 10)
        #expect(blocklist.list(now: 10).count == UserBlocklist.limit)
    }
}
