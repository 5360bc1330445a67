import Glibc
import Logging
import RelayCore
import StunCodec

/// The `state-dir` (docs/state-journal.md): one journal per loop, `loop-<index>.journal`, 0600 in
/// a directory relayd keeps private. At start-up every journal is read back (this boot's only),
/// merged, and the files go: each loop writes its own again from what it restored.
struct StateDirectory: Sendable {
    let path: String
    let bootID: BootID

    /// What a start-up found: the merged state, and what to log.
    struct Recovered: Sendable {
        var state = JournalState()
        var files = 0
        var refusedFiles: [String] = []
        var droppedRecords = 0
    }

    /// The biggest journal read back; a bigger file is refused (logged), never read.
    static let maximumFileBytes = 256 << 20

    /// Makes the directory (0700) if missing; nil, logged, when it cannot be used. A directory
    /// others may read is used with a warning: its journals hold key material.
    static func open(path: String, logger: Logger) -> StateDirectory? {
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            logger.error("state-dir \(path): cannot create it: \(String(cString: strerror(errno))); no state journal")
            return nil
        }
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, access(path, W_OK | X_OK) == 0 else {
            logger.error("state-dir \(path): not a writable directory; no state journal")
            return nil
        }
        if info.st_mode & 0o077 != 0 {
            logger.warning("state-dir \(path) is readable by others: its journals hold keys; chmod 700 it")
        }
        guard let bootID = Self.currentBootID() else {
            logger.error("state-dir: cannot read /proc/sys/kernel/random/boot_id; no state journal")
            return nil
        }
        return StateDirectory(path: path, bootID: bootID)
    }

    static func currentBootID() -> BootID? {
        ProcessMetrics.readFile("/proc/sys/kernel/random/boot_id").flatMap { BootID(text: $0) }
    }

    func journalPath(loop: Int) -> String { "\(path)/loop-\(loop).journal" }

    /// The name the nonce key is kept under in the journals' keys record.
    static let nonceKeyName = "nonce-key"

    /// Reads and removes every loop journal of the directory. A journal of another boot, of an
    /// unknown version or damaged in its header is refused whole; a damaged tail loses what
    /// follows the damage (docs/state-journal.md).
    func recover(now: Int64, bounds: JournalBounds) -> Recovered {
        var recovered = Recovered()
        for name in journalNames() {
            let file = "\(path)/\(name)"
            defer { unlink(file) }
            guard let bytes = Self.readFile(file, limit: Self.maximumFileBytes) else {
                recovered.refusedFiles.append("\(name): unreadable or over \(Self.maximumFileBytes) bytes")
                continue
            }
            do {
                let recovery = try JournalReader.read(bytes, bootID: bootID, now: now, bounds: bounds)
                recovered.files += 1
                recovered.droppedRecords += recovery.drops.values.reduce(0, +) + (recovery.tail == nil ? 0 : 1)
                for (id, allocation) in recovery.state.allocations { recovered.state.allocations[id] = allocation }
                for (token, reservation) in recovery.state.reservations {
                    recovered.state.reservations[token] = reservation
                }
                if !recovery.state.keys.isEmpty { recovered.state.keys = recovery.state.keys }
            } catch {
                recovered.refusedFiles.append("\(name): \(error)")
            }
        }
        return recovered
    }

    /// `loop-<n>.journal` files (and their leftover `.tmp` copies, which are removed).
    private func journalNames() -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasPrefix("loop-") else { continue }
            if name.hasSuffix(".journal.tmp") { unlink("\(path)/\(name)") }
            if name.hasSuffix(".journal") { names.append(name) }
        }
        return names.sorted()
    }

    /// The bytes of `file`, at most `limit`; nil when it cannot be read or is bigger.
    static func readFile(_ file: String, limit: Int) -> [UInt8]? {
        let fd = Glibc.open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_size <= limit else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            done += n
        }
        return Array(bytes[..<done])
    }
}

extension RelayServer {
    /// One line for what the state directory gave back at start-up (docs/state-journal.md).
    static func log(_ recovered: StateDirectory.Recovered, of directory: StateDirectory, logger: Logger) {
        for refused in recovered.refusedFiles {
            logger.warning(
                "state journal refused, starting without it: \(refused)",
                metadata: ["event": "state_journal_refused", "state_dir": "\(directory.path)"])
        }
        guard recovered.files > 0 else { return }
        logger.notice(
            "state journal read: \(recovered.state.allocations.count) UDP allocations to restore",
            metadata: [
                "event": "state_journal_read", "state_dir": "\(directory.path)", "files": "\(recovered.files)",
                "allocations": "\(recovered.state.allocations.count)",
                "records_dropped": "\(recovered.droppedRecords)",
            ])
    }
}
