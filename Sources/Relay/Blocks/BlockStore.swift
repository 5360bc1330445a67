import Glibc
import Logging
import RelayCore

/// The blocks the admin API sets, kept beyond the process (docs/admin.md, "Blocks that last"):
/// in `state-dir/blocks`, rewritten whole through a new file renamed over it, and in a cluster in
/// Redis (`ClusterBlocks`). In a cluster it also holds the changes made here that Redis has not
/// confirmed (`pending`): they are written to the file too, so a restart still sends them. Used
/// on the main thread only (the admin API and the cluster agent run there).
final class BlockStore {
    let blocklist: UserBlocklist
    /// `state-dir/blocks`; nil without a state directory, or once a live upgrade handed over.
    private(set) var path: String?
    private let logger: Logger
    /// Whether changes are kept for a cluster to confirm.
    var clustered = false
    struct Pending {
        /// The block, or a lift (`until` 0).
        var entry: UserBlocklist.Entry
        var serial: UInt64
    }
    /// Changes made here that the cluster has not confirmed, by user; a later one replaces an
    /// earlier one.
    private(set) var pending: [String: Pending] = [:]
    /// Lifts confirmed by the cluster or read from it, by user, for a day
    /// (`ClusterBlocks.forgetAfter`), at most `maximumLifts`: merged back into a Redis
    /// that came back from an older snapshot or a lagging replica, they keep it from bringing
    /// back a block lifted since (docs/admin.md, "Blocks that last"). Kept in the file too.
    private(set) var lifts: [String: UserBlocklist.Entry] = [:]
    private var serial: UInt64 = 0
    /// The table changed since the file was written.
    private var dirty = false

    static let fileName = "blocks"
    static let header = "relayd-blocks 1"
    /// Lifts kept at most: a day of an operator's lifts, and a bound on the file.
    static let maximumLifts = 10_000
    /// The biggest file read back: 100,000 blocks and `maximumLifts` lifts of 512-byte names and
    /// 256-byte key names, percent-encoded, fit.
    static let maximumFileBytes = 256 << 20

    init(blocklist: UserBlocklist, directory: String?, logger: Logger) {
        self.blocklist = blocklist
        path = directory.map { "\($0)/\(Self.fileName)" }
        self.logger = logger
    }

    /// Adds the file's blocks still in force at `now` to the blocklist, and its unconfirmed
    /// changes to `pending` (at start-up).
    func load(now: Int64) {
        guard let path, access(path, F_OK) == 0 else { return }
        guard let bytes = StateDirectory.readFile(path, limit: Self.maximumFileBytes) else {
            logger.warning(
                "blocks file \(path) is unreadable or over \(Self.maximumFileBytes) bytes; starting without it",
                metadata: ["event": "blocks_file_refused"])
            return
        }
        let (records, refused) = Self.parse(bytes)
        guard let records else {
            logger.warning(
                "blocks file \(path) has no '\(Self.header)' header; starting without it",
                metadata: ["event": "blocks_file_refused"])
            return
        }
        for (entry, isPending) in records {
            if entry.until > now { blocklist.block(entry) }
            if isPending {
                remember(entry)
            } else if Self.isLift(entry) {
                keep(lift: entry, now: now)
            }
        }
        if refused > 0 {
            logger.warning(
                "blocks file \(path): \(refused) malformed lines skipped", metadata: ["event": "blocks_file_damaged"])
        }
    }

    /// The file's records and how many lines were refused; nil records when the header is wrong.
    static func parse(_ bytes: [UInt8]) -> (records: [(entry: UserBlocklist.Entry, pending: Bool)]?, refused: Int) {
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
        guard let first = lines.first, first.elementsEqual(header.utf8) else { return (nil, 0) }
        var records: [(entry: UserBlocklist.Entry, pending: Bool)] = []
        var refused = 0
        for line in lines.dropFirst() {
            guard let text = String(validating: line, as: UTF8.self), let record = BlockRecord.parseLine(text[...]) else {
                refused += 1
                continue
            }
            records.append(record)
        }
        return (records, refused)
    }

    /// Sets a block here and keeps it (the file is written within a second, by `saveIfDirty`);
    /// false when the blocklist is full.
    func set(_ entry: UserBlocklist.Entry, now: Int64) -> Bool {
        let kept = UserBlocklist.Entry(
            user: entry.user, until: entry.until, setBy: BlockRecord.clampedSetBy(entry.setBy), setAt: entry.setAt)
        guard blocklist.block(kept) else { return false }
        if clustered { remember(kept) } else { pending[kept.user] = nil }
        lifts[kept.user] = nil
        dirty = true
        return true
    }

    /// Lifts a block here, and in a cluster everywhere (even one this node has not heard of
    /// yet): a lift is kept as an entry with `until` 0. False when there was none here.
    func lift(_ user: String, by: String, now: Int64) -> Bool {
        let found = blocklist.unblock(user)
        if clustered {
            remember(UserBlocklist.Entry(user: user, until: 0, setBy: BlockRecord.clampedSetBy(by), setAt: now))
        } else {
            pending[user] = nil
        }
        if found || clustered { dirty = true }
        return found
    }

    private func remember(_ entry: UserBlocklist.Entry) {
        serial += 1
        pending[entry.user] = Pending(entry: entry, serial: serial)
    }

    /// The cluster confirmed this change (unless a later one replaced it meanwhile).
    func confirm(_ user: String, serial: UInt64) {
        guard let change = pending[user], change.serial == serial else { return }
        pending[user] = nil
        if Self.isLift(change.entry) { keep(lift: change.entry, now: change.entry.setAt) }
        dirty = true
    }

    /// Whether `entry` is a lift: `until` 0, made at a time (an entry read as gone from the
    /// cluster's table has neither).
    static func isLift(_ entry: UserBlocklist.Entry) -> Bool { entry.until == 0 && entry.setAt > 0 }

    /// Keeps `entry`'s news about lifts: a lift is kept, unless a later one is; a later block
    /// ends the lift kept.
    private func learn(_ entry: UserBlocklist.Entry, now: Int64) {
        if Self.isLift(entry) {
            keep(lift: entry, now: now)
        } else if let kept = lifts[entry.user], entry.until > 0, entry.setAt >= kept.setAt {
            lifts[entry.user] = nil
            dirty = true
        }
    }

    /// Keeps `lift` unless it is a day old at `now`, a later lift of its user is kept, or
    /// `maximumLifts` are kept (once old ones were let go).
    private func keep(lift: UserBlocklist.Entry, now: Int64) {
        guard lift.setAt > now - ClusterBlocks.forgetAfter else { return }
        let kept = lifts[lift.user]
        guard kept.map({ $0.setAt <= lift.setAt }) ?? true, kept != lift else { return }
        if kept == nil, lifts.count >= Self.maximumLifts {
            forgetOldLifts(now: now)
            guard lifts.count < Self.maximumLifts else { return }
        }
        lifts[lift.user] = lift
        dirty = true
    }

    /// Lets go of the lifts a day old at `now` (the cluster's agent calls it every minute).
    func forgetOldLifts(now: Int64) {
        let old = lifts.values.filter { $0.setAt <= now - ClusterBlocks.forgetAfter }
        for entry in old { lifts[entry.user] = nil }
        if !old.isEmpty { dirty = true }
    }

    /// The lifts kept that are younger than a day at `now`, less those with a change pending.
    func recentLifts(now: Int64) -> [UserBlocklist.Entry] {
        forgetOldLifts(now: now)
        return lifts.values.filter { pending[$0.user] == nil }
    }

    /// Entries read from the cluster: each replaces this node's entry for its user unless this
    /// node has an unconfirmed change of that user. A lift or a lapsed block ends the user's
    /// block. With `whole`, users the cluster does not list lose their block too.
    func apply(_ entries: [UserBlocklist.Entry], whole: Bool, now: Int64) {
        if whole {
            var table: [String: UserBlocklist.Entry] = [:]
            for entry in entries {
                if pending[entry.user] == nil { learn(entry, now: now) }
                if entry.until > now { table[entry.user] = entry }
            }
            for (user, change) in pending { table[user] = change.entry.until > now ? change.entry : nil }
            if blocklist.replace(with: Array(table.values), now: now) { dirty = true }
            return
        }
        for entry in entries where pending[entry.user] == nil {
            learn(entry, now: now)
            let changed = entry.until > now ? blocklist.update(entry) : blocklist.unblock(entry.user)
            if changed { dirty = true }
        }
    }

    /// Writes the file if anything changed since the last write: at most once a second (the
    /// main loop's timer and the cluster's tick call it), so a burst of changes costs one write.
    func saveIfDirty(now: Int64) {
        if dirty { save(now: now) }
    }

    /// After a live upgrade the heir owns `state-dir`: this process writes no more.
    func stopSaving() {
        path = nil
    }

    /// Writes the blocks in force and the unconfirmed changes: a new file (this process's own
    /// name, created exclusively), synced, renamed over the old one, and the directory synced.
    /// A failure is logged; the blocks still hold in this process.
    private func save(now: Int64) {
        dirty = false
        guard let path else { return }
        var text = Self.header + "\n"
        for entry in blocklist.list(now: now) where pending[entry.user] == nil { text += BlockRecord.line(entry) }
        for change in pending.values { text += BlockRecord.line(change.entry, pending: true) }
        for entry in lifts.values where pending[entry.user] == nil && entry.setAt > now - ClusterBlocks.forgetAfter {
            text += BlockRecord.line(entry)
        }
        let temporary = "\(path).\(getpid()).tmp"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        var ok = fd >= 0
        if ok {
            let bytes = Array(text.utf8)
            var start = 0
            while ok && start < bytes.count {
                let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + start, $0.count - start) }
                if n < 0 && errno == EINTR { continue }
                ok = n > 0
                start += max(n, 0)
            }
            ok = fsync(fd) == 0 && ok
            ok = close(fd) == 0 && ok
            ok = ok && rename(temporary, path) == 0
        }
        guard !ok else {
            Self.syncDirectory(of: path)
            return
        }
        let reason = String(cString: strerror(errno))
        unlink(temporary)
        dirty = true
        logger.error(
            "blocks file \(path): cannot write it (\(reason)); the blocks hold until this process ends",
            metadata: ["event": "blocks_file_unwritable"])
    }

    private static func syncDirectory(of path: String) {
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}
