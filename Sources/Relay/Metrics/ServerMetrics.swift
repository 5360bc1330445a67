/// What `/metrics` adds to the loops' counters about the process and its listeners: the standard
/// `process_` metrics, open TCP/TLS connections, and the TLS certificate's expiry (for an alert
/// before it lapses).
public struct ServerMetrics: Sendable {
    public var process: ProcessMetrics
    /// TCP and TLS client connections open now.
    public var openStreamConnections: Int
    /// The serving certificate's notAfter (unix seconds); nil without TLS.
    public var certificateExpiry: Int64?
    /// coturn's user database (docs/userdb.md), when `userdb` is set.
    public var userDatabase: UserDatabaseMetrics?

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
        if let userDatabase {
            p.family("relayd_userdb_up", .gauge, help: "1 while the last read of the user database succeeded, else 0.")
            p.sample("relayd_userdb_up", [], userDatabase.up ? 1 : 0)
            p.family("relayd_userdb_users", .gauge, help: "Users in the in-memory view of the user database, all realms.")
            p.sample("relayd_userdb_users", [], UInt64(max(0, userDatabase.users)))
            p.family(
                "relayd_userdb_read_failures_total", .counter,
                help: "Reads of the user database that failed (the last good view stayed in use).")
            p.sample("relayd_userdb_read_failures_total", [], userDatabase.failures)
        }
        return p.text
    }
}

/// The user database's state for `/metrics`.
public struct UserDatabaseMetrics: Sendable {
    public var up: Bool
    public var users: Int
    public var failures: UInt64
}
