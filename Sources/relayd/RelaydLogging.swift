import Foundation
import Logging
import Relay

/// Logging set-up for the daemon: swift-log to stderr, stdout or `log-file` (coturn's special
/// values `stdout`/`stderr` included); `verbose` lowers the level to debug.
enum RelaydLogging {
    /// Bootstraps swift-log once for the process and returns relayd's logger, plus a warning
    /// when the configured destination could not be used.
    static func makeRelaydLogger(configuration: RelayConfiguration) -> (Logger, [String]) {
        var notes: [String] = []
        let level: Logger.Level = configuration.verbose ? .debug : .info
        var file: LogFileStream? = nil
        switch configuration.logFile {
        case nil, "stderr", "-":
            break
        case "stdout":
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardOutput(label: label)
                handler.logLevel = level
                return handler
            }
            return (Logger(label: "relayd"), notes)
        case let path?:
            file = LogFileStream(path: path)
            if file == nil { notes.append("log-file '\(path)' cannot be opened for writing; logging to stderr") }
        }
        if configuration.syslog { notes.append("syslog is not supported yet; logging to \(file == nil ? "stderr" : "the log file")") }
        if let file {
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler(label: label, stream: file)
                handler.logLevel = level
                return handler
            }
        } else {
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        }
        return (Logger(label: "relayd"), notes)
    }
}
