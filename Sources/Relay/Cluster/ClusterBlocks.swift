import Glibc
import Logging
import RelayCore

/// Blocks across the cluster (docs/admin.md, "Blocks that last"), on the main loop beside the
/// agent. Redis holds the table, a version and a log of the users changed
/// (`ClusterBlockScripts`); every change carries its time and the later one wins.
///
/// On each new connection the node first merges its own table into Redis (so a Redis that lost
/// the table, or came back from an old snapshot or a lagging replica, gets the blocks back
/// without undoing a newer change) and reads the whole table. Then, every 100 ms, it sends the
/// changes made here that Redis has not confirmed, and asks what changed since the version it
/// holds: the users the log names, or the whole table when the log does not reach back.
final class ClusterBlocks {
    private let store: BlockStore
    private let logger: Logger
    /// The version of the table this node holds, on this connection; nil: read it whole.
    private var version: Int64?
    /// This connection merged the node's table into Redis.
    private var merged = false
    /// A read is in flight.
    private var reading = false
    /// Unconfirmed changes sent on this connection, by user, with their serial.
    private var sent: [String: UInt64] = [:]
    private var ticks = 0
    /// Entries refused as malformed, and replies that were errors.
    private(set) var refused: UInt64 = 0
    private(set) var errors: UInt64 = 0

    /// Entries (users and values) a single script call carries.
    static let chunk = 500
    /// A lift or a lapsed block is forgotten once this old (seconds): long enough that a node
    /// back from a partition cannot bring back a block lifted meanwhile.
    static let forgetAfter: Int64 = 86_400

    init(store: BlockStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// A new connection: merge, read the table whole, send every unconfirmed change again.
    func connectionUp() {
        version = nil
        merged = false
        reading = false
        sent = [:]
    }

    /// Every 100 ms while Redis is up.
    func tick(_ connection: RedisConnection) {
        ticks += 1
        let now = Int64(time(nil))
        if !merged {
            merged = true
            merge(connection, now: now)
        }
        flush(connection)
        if !reading { read(connection) }
        if ticks % 600 == 0 { store.forgetOldLifts(now: now) }
        if ticks % 10 == 0 { store.saveIfDirty(now: now) }
    }

    private var keys: [String] { [ClusterKeys.blocks, ClusterKeys.blocksVersion, ClusterKeys.blocksLog] }

    /// This node's blocks in force and the lifts it knows from the last day, sent as if new:
    /// each lands unless Redis holds a change of the same second or later, so a Redis back from
    /// an older snapshot gets neither a lifted block back nor loses a block.
    private func merge(_ connection: RedisConnection, now: Int64) {
        let blocks = store.blocklist.list(now: now).filter { store.pending[$0.user] == nil }
        let entries = blocks + store.recentLifts(now: now)
        for start in stride(from: 0, to: entries.count, by: Self.chunk) {
            var arguments = ["EVAL", ClusterBlockScripts.set, "3"] + keys + ["merge"]
            for entry in entries[start..<min(start + Self.chunk, entries.count)] {
                arguments += [entry.user, BlockRecord.value(entry)]
            }
            connection.send(arguments) { [weak self] reply in self?.check(reply, doing: "merging the blocks") }
        }
    }

    private func flush(_ connection: RedisConnection) {
        for (user, change) in store.pending where sent[user] != change.serial {
            sent[user] = change.serial
            let serial = change.serial
            let arguments = ["EVAL", ClusterBlockScripts.set, "3"] + keys + ["change", user, BlockRecord.value(change.entry)]
            let accepted = connection.send(arguments) { [weak self] reply in
                guard let self else { return }
                if let refused = reply?.elements {
                    self.store.confirm(user, serial: serial)
                    // Redis held a newer change: this node takes it.
                    if !refused.isEmpty { self.apply(refused, whole: false, version: self.version, connection: connection) }
                } else {
                    self.check(reply, doing: "sending a block")
                    if self.sent[user] == serial { self.sent[user] = nil }
                }
            }
            if !accepted { sent[user] = nil }
        }
    }

    private func read(_ connection: RedisConnection) {
        reading = true
        let since = version.map(String.init) ?? "-1"
        let accepted = connection.send(["EVAL", ClusterBlockScripts.since, "3"] + keys + [since]) { [weak self] reply in
            guard let self else { return }
            guard let fields = reply?.elements, let first = fields.first, let version = first.text.flatMap(Int64.init) ?? first.integer
            else {
                self.reading = false
                self.check(reply, doing: "reading the blocks")
                return
            }
            switch fields.count > 1 ? fields[1].text : nil {
            case "full" where self.version.map({ version < $0 }) ?? false:
                // The version went back: Redis lost data without dropping the connection
                // (FLUSHALL, eviction). Merge this node's table again, then read it whole.
                self.reading = false
                self.version = nil
                self.merged = false
            case "full": self.readWhole(connection, version: version)
            case "delta":
                self.reading = false
                self.apply(Array(fields.dropFirst(2)), whole: false, version: version, connection: connection)
            default:
                self.reading = false
                self.version = version
            }
        }
        if !accepted { reading = false }
    }

    private func readWhole(_ connection: RedisConnection, version: Int64) {
        connection.send(["HGETALL", ClusterKeys.blocks]) { [weak self] reply in
            guard let self else { return }
            self.reading = false
            guard let fields = reply?.elements else { return self.check(reply, doing: "reading the blocks") }
            self.apply(fields, whole: true, version: version, connection: connection)
        }
    }

    /// User and value pairs from Redis, made this node's; old lifts and lapsed blocks forgotten.
    /// `version`: the table's version they make this node hold (nil: unchanged).
    private func apply(_ fields: [RedisReply], whole: Bool, version: Int64?, connection: RedisConnection) {
        let now = Int64(time(nil))
        var entries: [UserBlocklist.Entry] = []
        var forgettable: [String] = []
        var malformed = 0
        var i = 0
        while i + 1 < fields.count {
            defer { i += 2 }
            guard case .string(let user) = fields[i], let value = fields[i + 1].text else {
                malformed += 1
                continue
            }
            if value.isEmpty, let name = String(validating: user, as: UTF8.self) {
                // Gone from the table: not blocked.
                entries.append(UserBlocklist.Entry(user: name, until: 0))
                continue
            }
            guard let entry = BlockRecord.parse(user: user, value: value[...]) else {
                malformed += 1
                continue
            }
            entries.append(entry)
            if max(entry.until, entry.setAt) <= now - Self.forgetAfter {
                forgettable += [entry.user, value]
            }
        }
        store.apply(entries, whole: whole, now: now)
        if let version { self.version = version }
        for start in stride(from: 0, to: forgettable.count, by: 2 * Self.chunk) {
            let slice = forgettable[start..<min(start + 2 * Self.chunk, forgettable.count)]
            connection.send(["EVAL", ClusterBlockScripts.forget, "1", ClusterKeys.blocks] + slice) { [weak self] reply in
                self?.check(reply, doing: "forgetting old blocks")
            }
        }
        if malformed > 0 {
            refused += UInt64(malformed)
            logger.warning(
                "cluster: \(malformed) malformed blocks in Redis ignored",
                metadata: ["event": "cluster_blocks_malformed", "count": "\(malformed)"])
        }
    }

    private func check(_ reply: RedisReply?, doing what: String) {
        guard let message = reply?.errorMessage else { return }
        errors += 1
        logger.warning("cluster: Redis refused \(what): \(message)", metadata: ["event": "cluster_redis_error"])
    }
}
