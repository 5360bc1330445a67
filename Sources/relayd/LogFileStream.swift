import Foundation

/// An append-only log file for swift-log's `StreamLogHandler` (coturn's `log-file`). Lines are
/// written whole under a lock, so loop threads never interleave.
final class LogFileStream: TextOutputStream, @unchecked Sendable {
    // @unchecked: the only mutable state, the file handle's position, is guarded by `lock`.
    private let handle: FileHandle
    private let lock = NSLock()

    init?(path: String) {
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else { return nil }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else { return nil }
        handle.seekToEndOfFile()
        self.handle = handle
    }

    func write(_ string: String) {
        lock.lock()
        defer { lock.unlock() }
        handle.write(Data(string.utf8))
    }
}
