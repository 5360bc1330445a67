import Foundation

/// The `pidfile` coturn key: written at start, removed at exit.
struct PIDFile {
    let path: String?

    init(path: String?) throws {
        self.path = path
        if let path {
            try "\(ProcessInfo.processInfo.processIdentifier)\n".write(toFile: path, atomically: true, encoding: .utf8)
        }
    }

    func remove() {
        if let path { try? FileManager.default.removeItem(atPath: path) }
    }
}
