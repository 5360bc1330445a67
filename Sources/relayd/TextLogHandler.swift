import Glibc
import Logging

/// swift-log handler for the default text format. Its lines are exactly those of swift-log's
/// `StreamLogHandler` (`<time> <level> <label>: k=v … [<source>] <message>`, metadata sorted by
/// key), but built without merging dictionaries when only the call carries metadata, which
/// is every relayd line: the allocation created/deleted pair was a fifth of relayd's CPU during
/// the allocation-setup benchmark.
struct TextLogHandler: LogHandler {
    let label: String
    /// Where lines go; writes one whole line per call.
    let stream: any TextOutputStream & Sendable
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(
        label: String, stream: any TextOutputStream & Sendable,
        metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider
    ) {
        self.label = label
        self.stream = stream
        self.metadataProvider = metadataProvider
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var line = ""
        line.reserveCapacity(512)
        line += Self.timestamp()
        line += " \(event.level)"
        if !label.isEmpty { line += " " + label }
        line += ":"
        let provided = metadataProvider?.get() ?? [:]
        if metadata.isEmpty && provided.isEmpty && event.error == nil {
            if let own = event.metadata { Self.append(own, to: &line) }
        } else {
            // Precedence as in StreamLogHandler: handler, then provider, then the call's own.
            var merged = metadata
            merged.merge(provided) { _, new in new }
            if let own = event.metadata { merged.merge(own) { _, new in new } }
            if let error = event.error {
                merged["error.message"] = "\(error)"
                merged["error.type"] = "\(String(reflecting: type(of: error)))"
            }
            Self.append(merged, to: &line)
        }
        line += " [\(event.source)] \(event.message)\n"
        var output = stream
        output.write(line)
        LogFileStream.flushIfUrgent(stream, level: event.level)
    }

    /// ` key=value` for each entry, sorted by key.
    static func append(_ metadata: Logger.Metadata, to line: inout String) {
        // Appended piece by piece: `" " + key + "=" + value` would build three temporaries.
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            line.append(" ")
            line.append(key)
            line.append("=")
            line.append(value.description)
        }
    }

    /// Local time as `%Y-%m-%dT%H:%M:%S%z`, as StreamLogHandler writes it.
    static func timestamp() -> String {
        var now = time(nil)
        var local = tm()
        guard localtime_r(&now, &local) != nil else { return "<unknown>" }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 40) { buffer in
            let count = strftime(buffer.baseAddress!, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &local)
            return String(decoding: UnsafeRawBufferPointer(start: buffer.baseAddress!, count: count), as: UTF8.self)
        }
    }
}
