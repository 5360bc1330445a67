/// What `/metrics` adds to the loops' counters about the process and its listeners: the standard
/// `process_` metrics, open TCP/TLS connections, and the TLS certificate's expiry (for an alert
/// before it lapses).
public struct ServerMetrics: Sendable {
    public var process: ProcessMetrics
    /// TCP and TLS client connections open now.
    public var openStreamConnections: Int
    /// The serving certificate's notAfter (unix seconds); nil without TLS.
    public var certificateExpiry: Int64?

    public init(process: ProcessMetrics, openStreamConnections: Int, certificateExpiry: Int64?) {
        self.process = process
        self.openStreamConnections = openStreamConnections
        self.certificateExpiry = certificateExpiry
    }

    public func prometheus() -> String {
        var p = PrometheusText()
        process.render(into: &p)
        p.family("relayd_stream_connections_open", .gauge, help: "TCP and TLS client connections open now.")
        p.sample("relayd_stream_connections_open", [], UInt64(max(0, openStreamConnections)))
        if let certificateExpiry {
            p.family(
                "relayd_tls_certificate_expiry_timestamp_seconds", .gauge,
                help: "When the TLS certificate served expires (notAfter), in unix seconds.")
            p.sample("relayd_tls_certificate_expiry_timestamp_seconds", double: Double(certificateExpiry))
        }
        return p.text
    }
}
