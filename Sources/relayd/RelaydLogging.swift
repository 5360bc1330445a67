import Logging
import Relay

extension RelaydLogging {
    /// Bootstraps swift-log once for the process and returns relayd's logger
    /// (stderr; `verbose` lowers the level to debug).
    static func makeRelaydLogger(configuration: RelayConfiguration) -> Logger {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = configuration.verbose ? .debug : .info
            return handler
        }
        return Logger(label: "relayd")
    }
}

/// Namespace for logging set-up helpers.
enum RelaydLogging {}
