import Foundation

/// An append-only log file for swift-log handlers (coturn's `log-file`). Lines are written whole
/// under a lock, so loop threads never interleave; `reopen()` lets logrotate move the file away
/// and have relayd continue in a fresh one at the same path (SIGHUP).
final class LogFileStream: TextOutputStream, @unchecked Sendable {
    // @unchecked: the only mutable state, the file handle (and its position), is guarded by `lock`.
    let path: String
    private var handle: FileHandle
    private let lock = NSLock()

    init?(path: String) {
        guard let handle = Self.open(path) else { return nil }
        self.path = path
        self.handle = handle
    }

    func write(_ string: String) {
        lock.lock()
        defer { lock.unlock() }
        handle.write(Data(string.utf8))
    }

    /// Opens `path` again (creating it if it was moved away) and appends there from now on.
    /// Returns false, and keeps writing to the old file, when the path cannot be opened.
    @discardableResult
    func reopen() -> Bool {
        guard let fresh = Self.open(path) else { return false }
        lock.lock()
        let old = handle
        handle = fresh
        lock.unlock()
        try? old.close()
        return true
    }

    /// `path` opened for appending, created when missing.
    private static func open(_ path: String) -> FileHandle? {
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else { return nil }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else { return nil }
        handle.seekToEndOfFile()
        return handle
    }
}
