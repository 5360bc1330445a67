import Glibc
import Logging
import RelayCore

/// Blocks across the cluster (docs/admin.md, "Blocks that last"), on the main loop beside the
/// agent. Redis holds the table (`ClusterKeys.blocks`) and a version every change increments.
/// Every 100 ms the node reads the version; when it moved, it reads the table and makes it its
/// own, so a block set on any node holds on every node within a few hundred milliseconds.
/// A change made here is sent at once and kept until Redis confirms it, so one made while Redis
/// is away is published when it returns, and a table read meanwhile does not undo it. A Redis
/// that lost the table (restarted empty, no version) gets it back from the nodes' own copies.
final class ClusterBlocks {
    private let store: BlockStore
    private let logger: Logger
    private struct Change {
        /// The block set, or nil: lifted.
        var entry: UserBlocklist.Entry?
        var serial: UInt64
        var sent: Bool
    }
    /// This node's changes Redis has not confirmed, by user; a later change replaces an earlier.
    private var pending: [String: Change] = [:]
    private var serial: UInt64 = 0
    /// The version of the table last made ours on this connection; nil: none yet.
    private var version: String?
    /// A version or table read is in flight.
    private var reading = false
    /// Entries the last table read refused (malformed): counted, never trusted.
    private(set) var refused: UInt64 = 0

    /// Fields a single HSET or HDEL carries.
    static let chunk = 500

    init(store: BlockStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// A change made on this node (the admin API), to publish.
    func changed(_ user: String, _ entry: UserBlocklist.Entry?) {
        serial += 1
        pending[user] = Change(entry: entry, serial: serial, sent: false)
    }

    /// A new connection: read the table again and send every unconfirmed change again.
    func connectionUp() {
        version = nil
        reading = false
        for user in pending.keys { pending[user]?.sent = false }
    }

    /// Every 100 ms while Redis is up.
    func tick(_ connection: RedisConnection) {
        flush(connection)
        guard !reading else { return }
        reading = true
        connection.send(["GET", ClusterKeys.blocksVersion]) { [weak self] reply in
            guard let self else { return }
            guard let reply, reply.errorMessage == nil else {
                self.reading = false
                return
            }
            if let current = reply.text {
                guard current != self.version else {
                    self.reading = false
                    return
                }
                self.read(connection, version: current)
            } else {
                self.publishAll(connection)
            }
        }
    }

    private func flush(_ connection: RedisConnection) {
        for (user, change) in pending where !change.sent {
            pending[user]?.sent = true
            let serial = change.serial
            connection.send(["MULTI"])
            if let entry = change.entry {
                connection.send(["HSET", ClusterKeys.blocks, user, BlockRecord.value(entry)])
            } else {
                connection.send(["HDEL", ClusterKeys.blocks, user])
            }
            connection.send(["INCR", ClusterKeys.blocksVersion])
            connection.send(["EXEC"]) { [weak self] reply in
                guard let self, self.pending[user]?.serial == serial else { return }
                if reply?.elements != nil {
                    self.pending[user] = nil
                } else {
                    self.pending[user]?.sent = false
                }
            }
        }
    }

    /// Makes the cluster's table this node's, with this node's unconfirmed changes on top.
    private func read(_ connection: RedisConnection, version: String) {
        connection.send(["HGETALL", ClusterKeys.blocks]) { [weak self] reply in
            guard let self else { return }
            self.reading = false
            guard let fields = reply?.elements else { return }
            let now = Int64(time(nil))
            var table: [String: UserBlocklist.Entry] = [:]
            var lapsed: [String] = []
            var refused = 0
            var i = 0
            while i + 1 < fields.count {
                defer { i += 2 }
                guard case .string(let user) = fields[i], let value = fields[i + 1].text,
                    let entry = BlockRecord.parse(user: user, value: value[...])
                else {
                    refused += 1
                    continue
                }
                if entry.until > now { table[entry.user] = entry } else { lapsed.append(entry.user) }
            }
            for (user, change) in self.pending { table[user] = change.entry }
            self.store.replace(with: Array(table.values), now: now)
            self.version = version
            for start in stride(from: 0, to: lapsed.count, by: Self.chunk) {
                connection.send(["HDEL", ClusterKeys.blocks] + lapsed[start..<min(start + Self.chunk, lapsed.count)])
            }
            if refused > 0 {
                self.refused += UInt64(refused)
                self.logger.warning(
                    "cluster: \(refused) malformed blocks in Redis ignored",
                    metadata: ["event": "cluster_blocks_malformed", "count": "\(refused)"])
            }
        }
    }

    /// Redis has no version: it lost the table (or never had one). This node's copy goes back;
    /// every node does the same, so the union of what they held comes back.
    private func publishAll(_ connection: RedisConnection) {
        let entries = store.blocklist.list(now: Int64(time(nil)))
        for start in stride(from: 0, to: entries.count, by: Self.chunk) {
            var command = ["HSET", ClusterKeys.blocks]
            for entry in entries[start..<min(start + Self.chunk, entries.count)] {
                command += [entry.user, BlockRecord.value(entry)]
            }
            connection.send(command)
        }
        connection.send(["INCR", ClusterKeys.blocksVersion]) { [weak self] _ in self?.reading = false }
        if !entries.isEmpty {
            logger.notice(
                "cluster: Redis had no blocks; published this node's \(entries.count)",
                metadata: ["event": "cluster_blocks_published", "count": "\(entries.count)"])
        }
    }
}
