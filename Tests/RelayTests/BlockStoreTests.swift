import Foundation
import Logging
@testable import Relay
import RelayCore
import Testing

/// Blocks kept beyond the process (docs/admin.md, "Blocks that last"): the text form shared by
/// the `state-dir` file and Redis, the file written and read back, and a table replaced whole.
@Suite struct BlockStoreTests {
    static let logger = Logger(label: "relayd.block-tests") { _ in SwiftLogNoOpLogHandler() }

    /// A new empty directory of the test's own (a `state-dir`).
    static func makeDirectory() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relayd-blocks-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        return directory
    }

    @Test("A block's line and Redis value read back exactly, whatever the names hold")
    func roundTrip() throws {
        let entry = UserBlocklist.Entry(user: "al ice\n%x:é", until: 2_000_000_000, setBy: "ops team", setAt: 1_900_000_000)
        let line = BlockRecord.line(entry)
        #expect(line.hasSuffix("\n") && line.dropLast().allSatisfy { $0 != "\n" && $0 != "\r" })
        #expect(BlockRecord.parseLine(line.dropLast())?.entry == entry)
        #expect(BlockRecord.parseLine(line.dropLast())?.pending == false)
        #expect(BlockRecord.parseLine(BlockRecord.line(entry, pending: true).dropLast())?.pending == true)
        // A tenant's user (its prefix in front of the API's 256 bytes) and a long key name fit.
        let tenantUser = "voice/" + String(repeating: "u", count: 256)
        let long = UserBlocklist.Entry(
            user: tenantUser, until: 9, setBy: BlockRecord.clampedSetBy(String(repeating: "é", count: 300)), setAt: 1)
        #expect(long.setBy.utf8.count <= BlockRecord.maxSetByBytes)
        #expect(BlockRecord.parseLine(BlockRecord.line(long).dropLast())?.entry == long)
        #expect(BlockRecord.parse(user: Array(tenantUser.utf8), value: BlockRecord.value(long)[...]) == long)
        let value = BlockRecord.value(entry)
        #expect(BlockRecord.parse(user: Array(entry.user.utf8), value: value[...]) == entry)
        let unknown = UserBlocklist.Entry(user: "bob", until: 5)
        #expect(BlockRecord.parseLine(BlockRecord.line(unknown).dropLast())?.entry == unknown)
    }

    @Test("Malformed lines and values are refused", arguments: [
        "", "1 2 bob", "1 2 bob ops extra", "1 2 bob ops pendin", "x 2 bob ops", "1 x bob ops", "-1 2 bob ops", "1 -1 bob ops",
        "1 2  ops", "1 2 %zz ops", "1 2 %ff ops", "1 2 bob %", "1 2 \(String(repeating: "a", count: 513)) ops",
        "1 2 bob \(String(repeating: "b", count: 257))", "99999999999999999999 2 bob ops",
    ])
    func malformedLine(line: String) {
        #expect(BlockRecord.parseLine(line[...]) == nil)
    }

    @Test("A Redis field must be a user name of 1 to 512 UTF-8 bytes, its value three fields")
    func malformedValue() {
        #expect(BlockRecord.parse(user: [], value: "1 2 ops") == nil)
        #expect(BlockRecord.parse(user: [0xff], value: "1 2 ops") == nil)
        #expect(BlockRecord.parse(user: Array(repeating: 0x61, count: 513), value: "1 2 ops") == nil)
        #expect(BlockRecord.parse(user: Array("bob".utf8), value: "1 2") == nil)
        #expect(BlockRecord.parse(user: Array("bob".utf8), value: "1 2 ops x") == nil)
        #expect(BlockRecord.parse(user: Array("bob".utf8), value: "1 2 ops")?.setBy == "ops")
    }

    @Test("The state-dir file keeps blocks across a restart: set, lifted, lapsed, damaged, refused")
    func file() throws {
        let directory = try Self.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = BlockStore(blocklist: UserBlocklist(), directory: directory, logger: Self.logger)
        let now: Int64 = 1_000
        #expect(store.set(.init(user: "alice", until: now + 60, setBy: "ops", setAt: now), now: now))
        #expect(store.set(.init(user: "bob", until: now + 5, setBy: "ops", setAt: now), now: now))
        #expect(store.set(.init(user: "carol", until: now + 60, setBy: "ci", setAt: now), now: now))
        #expect(store.lift("carol", by: "ci", now: now))
        #expect(!store.lift("carol", by: "ci", now: now))
        #expect(store.pending.isEmpty, "without a cluster nothing waits for confirmation")
        // Changes are written at most once a second, by the main loop's timer.
        store.saveIfDirty(now: now)
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
        #expect(BlockStore.parse(Array(text.utf8)).records?.map(\.entry.user) == ["alice", "bob"])
        #expect(BlockStore.parse(Array("1 2 eve ops\n".utf8)).records == nil)
    }

    @Test("In a cluster, unconfirmed changes are kept in the file and come back with a restart")
    func pendingChanges() throws {
        let directory = try Self.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let now: Int64 = 5_000
        let store = BlockStore(blocklist: UserBlocklist(), directory: directory, logger: Self.logger)
        store.clustered = true
        #expect(store.set(.init(user: "mallory", until: now + 600, setBy: "ops", setAt: now), now: now))
        #expect(!store.lift("trent", by: "ops", now: now), "a lift of a block not known here is still sent")
        #expect(Set(store.pending.keys) == ["mallory", "trent"])
        // The cluster confirms mallory; a table read does not undo trent's lift meanwhile.
        store.confirm("mallory", serial: try #require(store.pending["mallory"]).serial)
        store.apply([.init(user: "trent", until: now + 100, setBy: "x", setAt: now - 5)], whole: true, now: now)
        #expect(!store.blocklist.isBlocked("trent", now: now))
        #expect(!store.blocklist.isBlocked("mallory", now: now), "a whole table without mallory lifts it")
        store.apply([.init(user: "mallory", until: now + 600, setBy: "ops", setAt: now)], whole: false, now: now)
        store.saveIfDirty(now: now)

        let restarted = BlockStore(blocklist: UserBlocklist(), directory: directory, logger: Self.logger)
        restarted.load(now: now)
        #expect(restarted.blocklist.isBlocked("mallory", now: now))
        #expect(restarted.pending.keys.sorted() == ["trent"])
        #expect(restarted.pending["trent"]?.entry.until == 0, "a lift is kept as an entry that ends at 0")
        #expect(restarted.pending["trent"]?.entry.setAt == now)
        // After a live upgrade the old process no longer writes the heir's file.
        restarted.stopSaving()
        #expect(restarted.set(.init(user: "eve", until: now + 60), now: now))
        restarted.saveIfDirty(now: now)
        let again = BlockStore(blocklist: UserBlocklist(), directory: directory, logger: Self.logger)
        again.load(now: now)
        #expect(!again.blocklist.isBlocked("eve", now: now))
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

extension BlockStoreTests {
    @Test("Outside a cluster, a change replaces a stale unconfirmed one left in the file")
    func stalePending() throws {
        let directory = try Self.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let now: Int64 = 9_000
        try "relayd-blocks 1\n0 \(now - 5) carol ops pending\n".write(
            toFile: "\(directory)/\(BlockStore.fileName)", atomically: false, encoding: .utf8)
        let store = BlockStore(blocklist: UserBlocklist(), directory: directory, logger: Self.logger)
        store.load(now: now)
        #expect(store.set(.init(user: "carol", until: now + 60, setBy: "ops", setAt: now), now: now))
        store.saveIfDirty(now: now)
        let again = BlockStore(blocklist: UserBlocklist(), directory: directory, logger: Self.logger)
        again.load(now: now)
        #expect(again.blocklist.isBlocked("carol", now: now))
        #expect(again.pending.isEmpty)
    }
}

extension BlockStoreTests {
    @Test("In a cluster, lifts are kept for a day, in the file too, and a later block ends one")
    func keptLifts() throws {
        let directory = try Self.makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let now: Int64 = 200_000
        let store = BlockStore(blocklist: UserBlocklist(), directory: directory, logger: Self.logger)
        store.clustered = true
        // A lift made here is kept once the cluster confirmed it; one read from the cluster too.
        #expect(store.set(.init(user: "mallory", until: now + 600, setBy: "ops", setAt: now - 10), now: now))
        store.confirm("mallory", serial: try #require(store.pending["mallory"]).serial)
        #expect(store.lift("mallory", by: "ops", now: now))
        #expect(store.recentLifts(now: now).isEmpty, "unconfirmed: still pending, not yet kept")
        store.confirm("mallory", serial: try #require(store.pending["mallory"]).serial)
        store.apply([.init(user: "oscar", until: 0, setBy: "sec", setAt: now - 3)], whole: false, now: now)
        // A user gone from the table (no time) is no lift; an older lift does not replace a newer.
        store.apply([.init(user: "gone", until: 0), .init(user: "mallory", until: 0, setBy: "x", setAt: now - 50)],
                    whole: true, now: now)
        let kept = store.recentLifts(now: now).sorted { $0.user < $1.user }
        #expect(kept.map(\.user) == ["mallory", "oscar"])
        #expect(kept.first?.setAt == now && kept.first?.setBy == "ops")
        store.saveIfDirty(now: now)

        let restarted = BlockStore(blocklist: UserBlocklist(), directory: directory, logger: Self.logger)
        restarted.clustered = true
        restarted.load(now: now + 60)
        #expect(restarted.pending.isEmpty)
        #expect(Set(restarted.recentLifts(now: now + 60).map(\.user)) == ["mallory", "oscar"])
        #expect(!restarted.blocklist.isBlocked("mallory", now: now + 60))
        // A later block ends oscar's lift; a day later mallory's is forgotten.
        restarted.apply([.init(user: "oscar", until: now + 900, setBy: "sec", setAt: now + 30)], whole: false, now: now + 60)
        #expect(restarted.recentLifts(now: now + 60).map(\.user) == ["mallory"])
        #expect(restarted.recentLifts(now: now + ClusterBlocks.forgetAfter).isEmpty)

        // Outside a cluster nothing asks for the lifts: the file drops them once a day old.
        let alone = BlockStore(blocklist: UserBlocklist(), directory: directory, logger: Self.logger)
        alone.load(now: now + 60)
        #expect(!alone.lifts.isEmpty)
        let later = now + ClusterBlocks.forgetAfter
        #expect(alone.set(.init(user: "eve", until: later + 60, setBy: "ops", setAt: later), now: later))
        alone.saveIfDirty(now: later)
        let reread = BlockStore(blocklist: UserBlocklist(), directory: directory, logger: Self.logger)
        reread.load(now: now)
        #expect(reread.lifts.isEmpty)
        #expect(reread.blocklist.isBlocked("eve", now: later))
    }
}

extension BlockStoreTests {
    @Test("Kept lifts: a new block here ends one, a day-old one is not taken, and they stay bounded")
    func liftBounds() {
        let now: Int64 = 300_000
        let store = BlockStore(blocklist: UserBlocklist(), directory: nil, logger: Self.logger)
        store.clustered = true
        store.apply([.init(user: "mallory", until: 0, setBy: "ops", setAt: now - 5)], whole: false, now: now)
        #expect(store.lifts.keys.sorted() == ["mallory"])
        #expect(store.set(.init(user: "mallory", until: now + 60, setBy: "ops", setAt: now), now: now))
        #expect(store.lifts.isEmpty, "a block set here ends the lift kept")
        store.apply([.init(user: "old", until: 0, setBy: "ops", setAt: now - ClusterBlocks.forgetAfter)], whole: true,
                    now: now)
        #expect(store.lifts.isEmpty, "a lift a day old is about to be forgotten: not kept")
        let many = (0...BlockStore.maximumLifts).map {
            UserBlocklist.Entry(user: "u\($0)", until: 0, setBy: "ops", setAt: now - 10)
        }
        store.apply(many, whole: false, now: now)
        #expect(store.lifts.count == BlockStore.maximumLifts)
        // Once the old ones go, there is room again.
        store.forgetOldLifts(now: now - 10 + ClusterBlocks.forgetAfter)
        #expect(store.lifts.isEmpty)
    }
}
