import Foundation
import Logging
import Relay

/// swift-log handler for `log-format=json`: one JSON object per line (`JSONLogLine`) on the
/// destination stream: standard output, standard error or the `log-file`.
struct JSONLogHandler: LogHandler {
    /// Where lines go; writes one whole line per call.
    let stream: any TextOutputStream & Sendable
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(
        stream: any TextOutputStream & Sendable,
        metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider
    ) {
        self.stream = stream
        self.metadataProvider = metadataProvider
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        // Precedence as in swift-log's StreamLogHandler: handler, then provider, then the call's own.
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let own = event.metadata { merged.merge(own) { _, new in new } }
        if let error = event.error, merged["error"] == nil { merged["error"] = "\(error)" }
        let line = JSONLogLine.format(
            level: event.level, message: event.message.description, metadata: merged,
            timestamp: Date().timeIntervalSince1970)
        var output = stream
        output.write(line + "\n")
        LogFileStream.flushIfUrgent(stream, level: event.level)
    }
}
