import Foundation
import Logging

/// An append-only log file for swift-log handlers (coturn's `log-file`).
///
/// Lines are appended whole to a buffer under a lock, so loop threads never interleave, and the
/// buffer goes to the file in one write(2) when it passes `flushBytes`, when a line of level
/// warning or above arrives (`flush()`), at the latest `flushInterval` later (a flusher thread),
/// on `reopen()` and at exit. With a write(2) per line, 8 % of relayd's CPU samples were in
/// write(2) while setting up allocations (two info lines each). A crash loses at most
/// the last `flushInterval` of info lines.
///
/// `reopen()` lets logrotate move the file away and have relayd continue in a fresh one at the
/// same path (SIGHUP).
final class LogFileStream: TextOutputStream, @unchecked Sendable {
    // @unchecked: the mutable state (descriptor, buffer) is guarded by `lock`.
    let path: String
    /// Buffered bytes that trigger a write at once.
    static let flushBytes = 32 * 1024
    /// The longest a line waits in the buffer.
    static let flushInterval: TimeInterval = 0.1

    private var descriptor: Int32
    private var pending: [UInt8] = []
    private let lock = NSLock()

    init?(path: String) {
        let fd = Self.open(path)
        guard fd >= 0 else { return nil }
        self.path = path
        self.descriptor = fd
        pending.reserveCapacity(2 * Self.flushBytes)
        startFlusher()
    }

    deinit {
        flush()
        close(descriptor)
    }

    func write(_ string: String) {
        var line = string
        line.withUTF8 { bytes in
            lock.lock()
            defer { lock.unlock() }
            pending.append(contentsOf: bytes)
            if pending.count >= Self.flushBytes { flushLocked() }
        }
    }

    /// Writes whatever is buffered now.
    func flush() {
        lock.lock()
        defer { lock.unlock() }
        flushLocked()
    }

    /// Flushes at once when `stream` is a log file and the line is a warning or worse, so
    /// problems reach the file without waiting for the flusher.
    static func flushIfUrgent(_ stream: any TextOutputStream & Sendable, level: Logger.Level) {
        if level >= .warning, let file = stream as? LogFileStream { file.flush() }
    }

    /// Opens `path` again (creating it if it was moved away) and appends there from now on; what
    /// was buffered goes to the old file first. Returns false, and keeps writing to the old file,
    /// when the path cannot be opened.
    @discardableResult
    func reopen() -> Bool {
        let fresh = Self.open(path)
        guard fresh >= 0 else { return false }
        lock.lock()
        flushLocked()
        let old = descriptor
        descriptor = fresh
        lock.unlock()
        close(old)
        return true
    }

    /// One write(2) of the buffer on the O_APPEND descriptor; a short write is finished, EINTR
    /// retried. On an error (disk full) the bytes are dropped rather than kept growing.
    private func flushLocked() {
        guard !pending.isEmpty else { return }
        pending.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// A background thread that flushes every `flushInterval` while the stream exists.
    private func startFlusher() {
        let thread = Thread { [weak self] in
            while true {
                Thread.sleep(forTimeInterval: Self.flushInterval)
                guard let stream = self else { return }
                stream.flush()
            }
        }
        thread.name = "relayd-log-flush"
        thread.start()
    }

    /// `path` opened for appending (O_APPEND: every write lands at the end, also after
    /// logrotate's copytruncate), created with mode 0644 when missing; -1 when it cannot be.
    private static func open(_ path: String) -> Int32 {
        Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
    }
}
