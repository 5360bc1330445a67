/// A writer for the Prometheus text exposition format, version 0.0.4: each metric family is a
/// `# HELP` and a `# TYPE` line followed by its samples, one per label set.
///
/// Hand-written rather than taken from swift-prometheus: relayd's counters are plain per-thread
/// integers summed at scrape time, and that library's counters can only be incremented in place
/// (atomics on the packet path) with no collector hook to supply a value when scraped.
public struct PrometheusText: Sendable {
    public enum MetricType: String, Sendable {
        case counter
        case gauge
        case histogram
    }

    public private(set) var text = ""
    /// Added to every counter and histogram sample written (a live upgrade's predecessor's values).
    public var carried = CarriedCounters()
    private var carrying = false

    /// The `Content-Type` of this format.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    public init() {}

    /// Starts a metric family; its samples must follow before the next family starts.
    public mutating func family(_ name: String, _ type: MetricType, help: String) {
        text += "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(type.rawValue)\n"
        carrying = !carried.isEmpty && type != .gauge && name.hasPrefix("relayd_")
    }

    /// One sample line: `name{label="value",...} value`.
    public mutating func sample(_ name: String, _ labels: [(String, String)] = [], _ value: UInt64) {
        guard carrying else {
            series(name, labels)
            text += " \(value)\n"
            return
        }
        var line = PrometheusText()
        line.series(name, labels)
        text += line.text + " \(value &+ carried.value(of: line.text))\n"
    }

    /// One sample with a fractional value (seconds of CPU, a unix time with sub-second part).
    public mutating func sample(_ name: String, _ labels: [(String, String)] = [], double value: Double) {
        series(name, labels)
        text += value == value.rounded() && abs(value) < 1e15 ? " \(Int64(value))\n" : " \(value)\n"
    }

    /// `name{label="value",...}`, the part of a sample line before its value.
    private mutating func series(_ name: String, _ labels: [(String, String)]) {
        text += name
        guard !labels.isEmpty else { return }
        text += "{"
        for (i, (key, labelValue)) in labels.enumerated() {
            if i > 0 { text += "," }
            text += "\(key)=\"\(Self.escapeLabelValue(labelValue))\""
        }
        text += "}"
    }

    /// A histogram's `_bucket` lines (cumulative, ending with `+Inf`), `_sum` and `_count`.
    public mutating func histogram(_ name: String, bounds: [Int64], cumulative: [UInt64], sum: UInt64) {
        for (i, bound) in bounds.enumerated() { sample("\(name)_bucket", [("le", "\(bound)")], cumulative[i]) }
        let count = cumulative.last ?? 0
        sample("\(name)_bucket", [("le", "+Inf")], count)
        sample("\(name)_sum", [], sum)
        sample("\(name)_count", [], count)
    }

    /// Label values escape backslash, double quote and line feed.
    public static func escapeLabelValue(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// HELP text escapes backslash and line feed.
    public static func escapeHelp(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
