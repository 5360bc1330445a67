import Foundation
import Logging
import Relay

/// Logging set-up for the daemon: swift-log to stderr, stdout or `log-file` (coturn's special
/// values `stdout`/`stderr` included), as text or, with `log-format=json`, one JSON object per
/// line; `verbose` lowers the level to debug.
enum RelaydLogging {
    /// What `makeRelaydLogger` set up.
    struct Setup: Sendable {
        /// relayd's logger.
        var logger: Logger
        /// Warnings about the destination (a log file that cannot be opened, syslog).
        var notes: [String]
        /// Reopens the `log-file` at its path, for logrotate (SIGHUP); does nothing when logging
        /// goes to stdout or stderr. Safe to call from any thread.
        var reopenLogFile: @Sendable () -> Void
        /// Writes out what the log file has buffered (at exit).
        var flushLogFile: @Sendable () -> Void
    }

    /// Bootstraps swift-log once for the process and returns relayd's logger, warnings about the
    /// destination, and the hook that reopens the log file.
    static func makeRelaydLogger(configuration: RelayConfiguration) -> Setup {
        var notes: [String] = []
        let level: Logger.Level = configuration.logLevel
        var file: LogFileStream? = nil
        var stream: any TextOutputStream & Sendable = StandardStream.error
        switch configuration.logFile {
        case nil, "stderr", "-":
            break
        case "stdout":
            stream = StandardStream.output
        case let path?:
            file = LogFileStream(path: path)
            if let file {
                stream = file
            } else {
                notes.append("log-file '\(path)' cannot be opened for writing; logging to stderr")
            }
        }
        if configuration.syslog {
            notes.append("syslog is not supported yet; logging to \(file == nil ? "stderr" : "the log file")")
        }
        let json = configuration.logFormat == .json
        let destination = stream
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler =
                json ? JSONLogHandler(stream: destination) : TextLogHandler(label: label, stream: destination)
            handler.logLevel = level
            return handler
        }
        let reopen: @Sendable () -> Void = { [file] in file?.reopen() }
        let flush: @Sendable () -> Void = { [file] in file?.flush() }
        return Setup(logger: Logger(label: "relayd"), notes: notes, reopenLogFile: reopen, flushLogFile: flush)
    }
}
