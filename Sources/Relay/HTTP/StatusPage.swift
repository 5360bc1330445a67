import Foundation
import RelayCore
import StunCodec

/// What the status page shows (docs/admin.md): the same counters `/metrics` exports, read at
/// the same moment, plus the rates of the last few seconds and the top users.
public struct StatusView: Sendable {
    public var version: String
    public var uptimeSeconds: Int
    public var draining: Bool
    public var loopThreads: Int
    public var metrics: LoopMetrics
    public var rates: (bytesToPeer: Double, bytesToClient: Double, packetsToPeer: Double, packetsToClient: Double)
    /// Users with live allocations, most bytes first; nil when a loop thread did not answer.
    public var topUsers: [UserTraffic]?
    public var openStreamConnections: Int
    public var credentialsIssued: UInt64
    /// In a cluster: this node's name, and the fleet as last read (nil while Redis is away).
    public var cluster: (node: String, fleet: ClusterFleet?)? = nil
}

/// The status page: one server-rendered HTML document, no script and no external asset (the
/// CSP header forbids both), refreshed by the browser every `refreshSeconds`. Every number has
/// an element id, so a test (or a scraper) can read it.
public enum StatusPage {
    public static let refreshSeconds = 5
    public static let topUsers = 10
    static let families: [IPAddress.Family] = [.ipv4, .ipv6]

    /// Headers of every status and login page: no caching, no framing, nothing loaded from elsewhere.
    static let headers: [HTTPResponse.Header] = [
        .init("Content-Type", "text/html; charset=utf-8"), .init("Cache-Control", "no-store"),
        .init("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"),
        .init("X-Frame-Options", "DENY"), .init("Referrer-Policy", "no-referrer"),
    ]

    public static func render(_ v: StatusView) -> String {
        let m = v.metrics
        let c = m.counters
        var html = head(title: "relayd status", refresh: true)
        html += "<header><h1>relayd</h1><span>\(escape(v.version))</span>"
        html += "<span id=\"state\" class=\"\(v.draining ? "warn" : "ok")\">\(v.draining ? "draining" : "serving")</span>"
        html += "<span>up <b id=\"uptime\">\(AllocationPage.duration(v.uptimeSeconds))</b></span>"
        html += "<span><b id=\"loop-threads\">\(v.loopThreads)</b> loop threads</span>"
        html += "<form method=\"post\" action=\"/status/logout\"><button>Log out</button></form></header>\n"

        let byTransport = TransportProtocol.allCases.map { t in
            (t.label, Self.families.reduce(UInt64(0)) { $0 + m.allocations(t, $1) })
        }
        let byFamily = Self.families.map { f in
            (f == .ipv4 ? "ipv4" : "ipv6", TransportProtocol.allCases.reduce(UInt64(0)) { $0 + m.allocations($1, f) })
        }
        let active = byTransport.reduce(UInt64(0)) { $0 + $1.1 }
        html += "<section><h2>Allocations</h2><table>"
        html += row("Active", id: "allocations-active", active)
        for (label, n) in byTransport { html += row("over \(label.uppercased())", id: "allocations-\(label)", n) }
        for (label, n) in byFamily { html += row("relayed \(label == "ipv4" ? "IPv4" : "IPv6")", id: "allocations-\(label)", n) }
        html += row("Permissions", id: "permissions", m.permissionsActive)
        html += row("Channels", id: "channels", m.channelsActive)
        html += row("Relay ports in use", id: "ports-in-use", m.relayPortsInUse)
        html += row("Relay ports free", id: "ports-free", m.relayPortsFree)
        html += row("Created since start", id: "allocations-created", c.allocationsCreated)
        html += "</table></section>\n"

        html += "<section><h2>Relayed traffic</h2><table>"
        html += "<tr><th></th><th>now (last \(Int(TrafficHistory.window)) s)</th><th>since start</th></tr>"
        html += trafficRow(
            "client → peer", id: "to-peer", bitsPerSecond: v.rates.bytesToPeer * 8, packetsPerSecond: v.rates.packetsToPeer,
            bytes: c.bytesToPeer, packets: c.packetsToPeer)
        html += trafficRow(
            "peer → client", id: "to-client", bitsPerSecond: v.rates.bytesToClient * 8,
            packetsPerSecond: v.rates.packetsToClient, bytes: c.bytesToClient, packets: c.packetsToClient)
        html += "</table></section>\n"

        html += "<section><h2>Top users</h2>"
        if let users = v.topUsers {
            html += "<table id=\"top-users\"><tr><th>user</th><th>allocations</th><th>to peer</th><th>to client</th></tr>"
            for (i, u) in users.prefix(topUsers).enumerated() {
                html += "<tr id=\"user-\(i)\"><td class=\"user\">\(escape(u.user))</td>"
                html += "<td class=\"allocations\">\(u.allocations)</td>"
                html += "<td class=\"to-peer\" data-value=\"\(u.traffic.bytesToPeer)\">\(AllocationPage.bytes(u.traffic.bytesToPeer))</td>"
                html += "<td class=\"to-client\" data-value=\"\(u.traffic.bytesToClient)\">\(AllocationPage.bytes(u.traffic.bytesToClient))</td></tr>"
            }
            if users.isEmpty { html += "<tr><td colspan=\"4\">no live allocations</td></tr>" }
            html += "</table>"
        } else {
            html += "<p class=\"warn\">a loop thread did not answer in time</p>"
        }
        html += "</section>\n"

        let failures = AuthOutcome.allCases.filter { $0 != .ok && $0 != .challenged }
        html += "<section><h2>Authentication</h2><table>"
        html += row("Succeeded", id: "auth-ok", c.authenticated(.ok))
        html += row("Failed", id: "auth-failures", failures.reduce(UInt64(0)) { $0 + c.authenticated($1) })
        for outcome in failures { html += row("&nbsp;&nbsp;\(outcome.label)", id: "auth-\(outcome.label)", c.authenticated(outcome)) }
        html += row("Credentials issued by the API", id: "credentials-issued", v.credentialsIssued)
        html += "</table></section>\n"

        html += "<section><h2>Dropped packets</h2><table>"
        html += row("Total", id: "drops-total", DropReason.allCases.reduce(UInt64(0)) { $0 + c.dropped($1) })
        for reason in DropReason.allCases { html += row(reason.label, id: "drop-\(reason.label)", c.dropped(reason)) }
        html += "</table></section>\n"

        html += "<section><h2>TCP and TLS</h2><table>"
        html += row("Open connections", id: "stream-connections", UInt64(max(0, v.openStreamConnections)))
        html += row("TLS handshakes completed", id: "tls-ok", m.tlsHandshakesOK)
        html += row("TLS handshakes failed", id: "tls-failed", m.tlsHandshakesFailed)
        html += "</table></section>\n"
        if let cluster = v.cluster { html += fleet(cluster.node, cluster.fleet) }
        html += "<footer>Refreshed every \(refreshSeconds) s. The same counters are on /metrics.</footer></body></html>\n"
        return html
    }

    /// The cluster's nodes as the registry lists them (docs/cluster.md): state, load,
    /// allocations; this node marked.
    static func fleet(_ own: String, _ fleet: ClusterFleet?) -> String {
        var html = "<section id=\"fleet\"><h2>Fleet</h2>"
        guard let fleet else {
            return html + "<p id=\"fleet-unknown\">Redis is unreachable: the fleet is not known.</p></section>\n"
        }
        html += "<table><tr><th>Node</th><th>State</th><th>Allocations</th><th>Packets/s</th><th>Relayed</th><th>CPU</th></tr>"
        for node in fleet.nodes {
            let id = escape(node.name)
            html += "<tr data-node=\"\(id)\"><td>\(id)\(node.name == own ? " (this node)" : "")</td>"
            html += "<td class=\"\(node.draining ? "warn" : "ok")\">\(node.draining ? "draining" : "serving")</td>"
            html += "<td class=\"allocations\">\(node.allocations)</td><td>\(node.packetsPerSecond)</td>"
            html += "<td>\(bitRate(Double(node.bytesPerSecond) * 8))</td><td>\(node.cpuPercent)%</td></tr>"
        }
        return html + "</table></section>\n"
    }

    /// The form that trades an admin token for a session cookie.
    public static func login(message: String?) -> String {
        var html = head(title: "relayd status: log in", refresh: false)
        html += "<section class=\"login\"><h1>relayd status</h1>"
        if let message { html += "<p id=\"login-message\" class=\"warn\">\(escape(message))</p>" }
        html += "<form method=\"post\" action=\"/status/login\">"
        html += "<label for=\"token\">Admin API token</label>"
        html += "<input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required autofocus>"
        html += "<button id=\"login\" type=\"submit\">Log in</button></form>"
        html += "<p>A token of an <code>api-key = name:token:admin</code> line of the configuration.</p></section></body></html>\n"
        return html
    }

    static func head(title: String, refresh: Bool) -> String {
        var html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        if refresh { html += "<meta http-equiv=\"refresh\" content=\"\(refreshSeconds)\">" }
        html += "<title>\(escape(title))</title><style>\(style)</style></head><body>\n"
        return html
    }

    static let style = """
        body{font:14px/1.4 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:12px;color:#222}\
        header{display:flex;gap:16px;align-items:baseline;flex-wrap:wrap;border-bottom:1px solid #ccc}\
        header form{margin-left:auto}h1{font-size:20px;margin:8px 0}h2{font-size:15px;margin:14px 0 4px}\
        section{display:inline-block;vertical-align:top;margin:0 24px 8px 0}\
        table{border-collapse:collapse}td,th{padding:2px 10px 2px 0;text-align:left}\
        td.n,td[data-value]{text-align:right;font-variant-numeric:tabular-nums}\
        .ok{color:#070;font-weight:bold}.warn{color:#b00;font-weight:bold}\
        .login{display:block;max-width:360px;margin:60px auto}.login input{display:block;width:100%;margin:6px 0}\
        footer{color:#777;margin-top:12px}
        """

    static func row(_ label: String, id: String, _ value: UInt64) -> String {
        "<tr><td>\(label)</td><td class=\"n\" id=\"\(id)\">\(value)</td></tr>"
    }

    static func trafficRow(
        _ label: String, id: String, bitsPerSecond: Double, packetsPerSecond: Double, bytes: UInt64, packets: UInt64
    ) -> String {
        "<tr><td>\(label)</td><td id=\"rate-\(id)\" data-value=\"\(Int(bitsPerSecond.rounded()))\">"
            + "\(bitRate(bitsPerSecond)), \(Int(packetsPerSecond.rounded())) packets/s</td>"
            + "<td id=\"bytes-\(id)\" data-value=\"\(bytes)\">\(AllocationPage.bytes(bytes)) in \(packets) packets</td></tr>"
    }

    /// `850 bit/s`, `12.5 kbit/s`, `3.2 Mbit/s`, `1.1 Gbit/s`.
    public static func bitRate(_ bps: Double) -> String {
        if bps < 1000 { return "\(Int(bps.rounded())) bit/s" }
        for (unit, scale) in [("kbit/s", 1e3), ("Mbit/s", 1e6), ("Gbit/s", 1e9)] where bps < scale * 1000 || unit == "Gbit/s" {
            return String(format: "%.1f ", bps / scale) + unit
        }
        return ""
    }

    /// Text for HTML content and attribute values.
    public static func escape(_ s: String) -> String {
        var out = ""
        for ch in s.unicodeScalars {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out
    }
}
