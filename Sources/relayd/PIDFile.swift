import Foundation

/// The `pidfile` coturn key: written at start (by a live upgrade's heir once it serves),
/// removed at exit (not by a process that handed over, docs/live-upgrade.md).
struct PIDFile: Sendable {
    let path: String?

    init(path: String?) { self.path = path }

    func write() throws {
        if let path {
            try "\(ProcessInfo.processInfo.processIdentifier)\n".write(toFile: path, atomically: true, encoding: .utf8)
        }
    }

    func remove() {
        if let path { try? FileManager.default.removeItem(atPath: path) }
    }
}
