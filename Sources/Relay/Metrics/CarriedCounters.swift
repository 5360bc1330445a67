/// The counters a live upgrade's predecessor had reached (docs/live-upgrade.md, "Metrics"), so
/// `/metrics` goes on counting from them instead of starting again at 0: every sample of a
/// `relayd_` family typed counter or histogram on the predecessor's page, by its series
/// (`name{labels}`). Gauges, `process_` families and the cluster's own counters are not carried.
///
/// The page comes from another process: it is parsed with bounds, and a line that is not a
/// sample this writer could have made is skipped and counted, never trusted.
public struct CarriedCounters: Sendable, Equatable {
    public private(set) var values: [String: UInt64] = [:]
    /// Lines skipped as malformed or beyond the bounds.
    public private(set) var skipped = 0

    /// At most this many series, and this long a line, are read.
    static let maxSeries = 20_000
    static let maxLineBytes = 1024

    public init() {}

    /// Reads a Prometheus text page as `PrometheusText` writes it.
    public init(page: String) {
        var carried: Bool?  // the current family's type is counter or histogram, of a relayd_ name
        for line in page.split(separator: "\n", omittingEmptySubsequences: true) {
            guard line.utf8.count <= Self.maxLineBytes else {
                skipped += 1
                continue
            }
            if line.hasPrefix("# HELP ") { continue }
            if line.hasPrefix("# TYPE ") {
                let words = line.split(separator: " ")
                carried =
                    words.count == 4 && words[2].hasPrefix("relayd_")
                    && (words[3] == "counter" || words[3] == "histogram")
                continue
            }
            guard carried == true else { continue }
            guard let space = line.lastIndex(of: " "), let value = UInt64(line[line.index(after: space)...]),
                values.count < Self.maxSeries || values[String(line[..<space])] != nil
            else {
                skipped += 1
                continue
            }
            let series = String(line[..<space])
            values[series, default: 0] &+= value
        }
    }

    public var isEmpty: Bool { values.isEmpty }

    /// The predecessor's value of `series` (0 when it had none).
    public func value(of series: String) -> UInt64 { values[series] ?? 0 }
}
