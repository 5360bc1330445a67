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
    /// Each tenant's allocations (docs/tenants.md), when tenants are configured: its label
    /// (`default` for the default tenant), allocations now and granted since the start.
    public var tenants: [(label: String, live: Int, granted: UInt64)] = []
    /// Each tenant's usage totals (docs/usage.md), labelled as `tenants` is.
    public var tenantUsage: [(label: String, counts: UsageBook.Counts)] = []
    /// Usage records counted in the usage book, and dropped (docs/usage.md).
    public var usageRecords: (applied: UInt64, dropped: UInt64) = (0, 0)

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
        p.family(
            "relayd_usage_records_total", .counter,
            help: "Usage records counted in the usage book, and dropped for want of room (docs/usage.md).")
        p.sample("relayd_usage_records_total", [("result", "applied")], usageRecords.applied)
        p.sample("relayd_usage_records_total", [("result", "dropped")], usageRecords.dropped)
        if !tenants.isEmpty {
            p.family("relayd_tenant_allocations", .gauge, help: "Allocations this node holds now, by tenant.")
            for t in tenants { p.sample("relayd_tenant_allocations", [("tenant", t.label)], UInt64(max(0, t.live))) }
            p.family(
                "relayd_tenant_allocations_granted_total", .counter,
                help: "Allocations admission granted on this node since it started, by tenant.")
            for t in tenants { p.sample("relayd_tenant_allocations_granted_total", [("tenant", t.label)], t.granted) }
        }
        if !tenantUsage.isEmpty {
            p.family(
                "relayd_tenant_relayed_bytes_total", .counter,
                help: "Payload bytes relayed for allocations that ended, by tenant and direction (docs/usage.md).")
            for t in tenantUsage {
                p.sample("relayd_tenant_relayed_bytes_total", [("tenant", t.label), ("direction", "client_to_peer")], t.counts.traffic.bytesToPeer)
                p.sample("relayd_tenant_relayed_bytes_total", [("tenant", t.label), ("direction", "peer_to_client")], t.counts.traffic.bytesToClient)
            }
            p.family(
                "relayd_tenant_allocation_seconds_total", .counter,
                help: "Seconds allocations that ended held their relayed address, by tenant (docs/usage.md).")
            for t in tenantUsage { p.sample("relayd_tenant_allocation_seconds_total", [("tenant", t.label)], t.counts.allocationSeconds) }
            p.family(
                "relayd_tenant_unused_allocations_total", .counter,
                help: "Allocations that ended without relaying a byte, by tenant (docs/usage.md).")
            for t in tenantUsage { p.sample("relayd_tenant_unused_allocations_total", [("tenant", t.label)], t.counts.unusedAllocations) }
        }
        return p.text
    }
}

extension ServerMetrics {
    /// Each configured tenant and the default one, in the configuration's order, with its label
    /// (`default` for the default tenant): the label's values are bounded by the configured
    /// tenants, and a tenant a reload removed drops out. None without tenants.
    static func tenantLabels(_ names: [String]) -> [(name: String, label: String)] {
        guard !names.isEmpty else { return [] }
        return ([""] + names).map { ($0, $0.isEmpty ? "default" : $0) }
    }

    /// `relayd_tenant_allocations` and its counter's rows.
    static func tenantRows(names: [String], counts: [String: (live: Int, granted: UInt64)])
        -> [(label: String, live: Int, granted: UInt64)]
    {
        tenantLabels(names).map { tenant in
            let count = counts[tenant.name] ?? (0, 0)
            return (tenant.label, count.live, count.granted)
        }
    }

    /// The per-tenant usage counters' rows (docs/usage.md).
    static func tenantUsageRows(names: [String], totals: [String: UsageBook.Counts])
        -> [(label: String, counts: UsageBook.Counts)]
    {
        tenantLabels(names).map { ($0.label, totals[$0.name] ?? UsageBook.Counts()) }
    }
}

/// The user database's state for `/metrics`.
public struct UserDatabaseMetrics: Sendable {
    public var up: Bool
    public var users: Int
    public var failures: UInt64
}
