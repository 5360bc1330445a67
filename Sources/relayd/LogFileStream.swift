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
        var line = string
        line.withUTF8 { bytes in
            lock.lock()
            defer { lock.unlock() }
            // One write(2) per line on an O_APPEND descriptor; a short write is finished, EINTR retried.
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(handle.fileDescriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
        }
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

    /// `path` opened for appending (O_APPEND: every line lands at the end, also after logrotate's
    /// copytruncate), created with mode 0644 when missing.
    private static func open(_ path: String) -> FileHandle? {
        let fd = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return nil }
        return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }
}
