import Foundation
import Glibc

/// Standard output or standard error for whole log lines: each line goes out in one locked
/// `write(2)` loop, so lines from different threads never interleave.
final class StandardStream: TextOutputStream, @unchecked Sendable {
    // @unchecked: holds only a descriptor number; writes are serialised by `lock`.
    private let descriptor: Int32
    private let lock = NSLock()

    static let output = StandardStream(descriptor: STDOUT_FILENO)
    static let error = StandardStream(descriptor: STDERR_FILENO)

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    func write(_ string: String) {
        let bytes = Array(string.utf8)
        lock.lock()
        defer { lock.unlock() }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw in
                Glibc.write(descriptor, raw.baseAddress! + offset, raw.count - offset)
            }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}
