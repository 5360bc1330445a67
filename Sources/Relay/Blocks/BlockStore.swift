import Glibc
import Logging
import RelayCore

/// The blocks the admin API sets, kept beyond the process (docs/admin.md, "Blocks that last"):
/// in `state-dir/blocks`, rewritten whole through a new file renamed over it at each change, and
/// in a cluster in Redis (`ClusterBlocks`), which is then the authority every node takes its
/// table from. Used on the main thread only (the admin API and the cluster agent run there).
final class BlockStore {
    let blocklist: UserBlocklist
    /// `state-dir/blocks`; nil without a state directory.
    let path: String?
    private let logger: Logger
    /// A change made on this node, for the cluster to publish: the new block, or nil when the
    /// user's block was lifted.
    var onChange: ((_ user: String, _ entry: UserBlocklist.Entry?) -> Void)?

    static let fileName = "blocks"
    static let header = "relayd-blocks 1"
    /// The biggest file read back: 100,000 blocks of long names fit; a bigger file is refused.
    static let maximumFileBytes = 64 << 20

    init(blocklist: UserBlocklist, directory: String?, logger: Logger) {
        self.blocklist = blocklist
        path = directory.map { "\($0)/\(Self.fileName)" }
        self.logger = logger
    }

    /// Adds the file's blocks still in force at `now` to the blocklist (at start-up, before
    /// blocks handed over by a live upgrade, which replace them user by user).
    func load(now: Int64) {
        guard let path, access(path, F_OK) == 0 else { return }
        guard let bytes = StateDirectory.readFile(path, limit: Self.maximumFileBytes) else {
            logger.warning(
                "blocks file \(path) is unreadable or over \(Self.maximumFileBytes) bytes; starting without it",
                metadata: ["event": "blocks_file_refused"])
            return
        }
        let (entries, refused) = Self.parse(bytes)
        guard let entries else {
            logger.warning("blocks file \(path) has no '\(Self.header)' header; starting without it",
                metadata: ["event": "blocks_file_refused"])
            return
        }
        for entry in entries where entry.until > now { blocklist.block(entry) }
        if refused > 0 {
            logger.warning("blocks file \(path): \(refused) malformed lines skipped", metadata: ["event": "blocks_file_damaged"])
        }
    }

    /// The file's entries and how many lines were refused; nil entries when the header is wrong.
    static func parse(_ bytes: [UInt8]) -> (entries: [UserBlocklist.Entry]?, refused: Int) {
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
        guard let first = lines.first, first.elementsEqual(header.utf8) else { return (nil, 0) }
        var entries: [UserBlocklist.Entry] = []
        var refused = 0
        for line in lines.dropFirst() {
            guard let text = String(validating: line, as: UTF8.self), let entry = BlockRecord.parseLine(text[...]) else {
                refused += 1
                continue
            }
            entries.append(entry)
        }
        return (entries, refused)
    }

    /// Sets a block here, keeps it, and hands it to the cluster; false when the table is full.
    func set(_ entry: UserBlocklist.Entry, now: Int64) -> Bool {
        guard blocklist.block(entry) else { return false }
        save(now: now)
        onChange?(entry.user, entry)
        return true
    }

    /// Lifts a block here and everywhere; false when there was none here.
    func lift(_ user: String, now: Int64) -> Bool {
        guard blocklist.unblock(user) else { return false }
        save(now: now)
        onChange?(user, nil)
        return true
    }

    /// The table as the cluster holds it; kept when it changed anything.
    func replace(with entries: [UserBlocklist.Entry], now: Int64) {
        if blocklist.replace(with: entries, now: now) { save(now: now) }
    }

    /// Writes the blocks in force to the file: a new file, synced, renamed over the old one.
    /// A failure is logged; the blocks still hold in this process.
    private func save(now: Int64) {
        guard let path else { return }
        let text = Self.header + "\n" + blocklist.list(now: now).map(BlockRecord.line).joined()
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
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
        guard !ok else { return }
        let reason = String(cString: strerror(errno))
        unlink(temporary)
        logger.error("blocks file \(path): cannot write it (\(reason)); the blocks hold until this process ends",
            metadata: ["event": "blocks_file_unwritable"])
    }
}
