import RelayCore

/// `GET /api/v1/usage` (docs/usage.md): this node's usage per tenant, user and hour, from the
/// usage book's hourly rows. An admin key of a tenant sees its own tenant only.
extension APIRouter {
    public static let usagePath = "/api/v1/usage"
    /// The longest window one request may ask for: 31 days of hours.
    static let maxUsageWindow: Int64 = 31 * 86400

    func usageAnswer(_ request: HTTPRequest, key: APIKeyring.Match, now: Int64) -> HTTPResponse {
        guard let query = QueryString.parse(request.query ?? "") else {
            return .error(400, "invalid_request", "the query string is malformed")
        }
        var tenant: String? = key.tenant
        var user: String? = nil
        var to = now + 1
        var from = now - 86400
        for (name, value) in query {
            switch name {
            case "tenant":
                // "default" names the default tenant; a tenant's key names only its own.
                let asked = value == "default" ? "" : value
                if let own = key.tenant, own != asked {
                    return .error(403, "forbidden", "api-key '\(key.name)' sees tenant '\(own)' only")
                }
                tenant = asked
            case "user":
                guard Self.isValidUser(value) else { return .error(400, "invalid_request", "user is not a valid user id") }
                user = value
            case "from", "to":
                guard let seconds = Int64(value), seconds >= 0 else {
                    return .error(400, "invalid_request", "\(name) must be unix seconds")
                }
                if name == "from" { from = seconds } else { to = seconds }
            default:
                return .error(400, "invalid_request", "unknown parameter '\(name)'; expected tenant, user, from, to")
            }
        }
        guard from < to, to - from <= Self.maxUsageWindow else {
            return .error(400, "invalid_request", "from must be before to, at most 31 days apart")
        }
        guard let usage else { return .error(503, "usage_unavailable", "usage accounting is not running") }
        let rows = usage.rows(tenant: tenant, user: user, from: from, to: to)
        return .json(200, Self.usageJSON(rows, from: from, to: to))
    }

    static func usageJSON(_ rows: [(key: UsageBook.Key, counts: UsageBook.Counts)], from: Int64, to: Int64) -> String {
        var w = JSONWriter()
        var total = UsageBook.Counts()
        for row in rows { total += row.counts }
        w.object { o in
            o.field("from", Int(from))
            o.field("to", Int(to))
            o.key("rows")
            o.array { a in
                for row in rows {
                    a.object { r in
                        r.field("hour", Int(row.key.hour))
                        r.field("tenant", row.key.tenant.isEmpty ? "default" : row.key.tenant)
                        r.field("user", row.key.user)
                        write(row.counts, to: &r)
                    }
                }
            }
            o.key("total")
            o.object { t in write(total, to: &t) }
        }
        return w.text
    }

    private static func write(_ c: UsageBook.Counts, to o: inout JSONWriter) {
        o.field("allocations", Int(clamping: c.allocations))
        o.field("unused_allocations", Int(clamping: c.unusedAllocations))
        o.field("allocation_seconds", Int(clamping: c.allocationSeconds))
        o.field("packets_to_peer", Int(clamping: c.traffic.packetsToPeer))
        o.field("bytes_to_peer", Int(clamping: c.traffic.bytesToPeer))
        o.field("packets_to_client", Int(clamping: c.traffic.packetsToClient))
        o.field("bytes_to_client", Int(clamping: c.traffic.bytesToClient))
    }
}
