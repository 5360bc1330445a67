import Foundation

/// `GET /api/v1/allocations` as `relayd sessions` reads it back, and the table it prints
/// (docs/admin.md).
public struct AllocationPage: Decodable, Sendable {
    public struct Item: Decodable, Sendable {
        public struct Traffic: Decodable, Sendable {
            public var packets_to_peer: UInt64
            public var bytes_to_peer: UInt64
            public var packets_to_client: UInt64
            public var bytes_to_client: UInt64
        }

        public struct Permission: Decodable, Sendable {
            public var peer: String
            public var remaining_seconds: Int
        }

        public struct Channel: Decodable, Sendable {
            public var number: Int
            public var peer: String
            public var remaining_seconds: Int
        }

        public var session: String
        public var user: String
        public var transport: String
        public var client: String
        public var server: String
        public var relayed: [String]
        public var age_seconds: Int
        public var remaining_seconds: Int
        public var mobile: Bool
        public var thread: Int
        public var permissions: [Permission]
        public var channels: [Channel]
        public var traffic: Traffic
    }

    public var allocations: [Item]
    public var count: Int
    public var total: Int
    public var next_cursor: String?

    public static func decode(_ json: String) throws -> AllocationPage {
        try JSONDecoder().decode(AllocationPage.self, from: Data(json.utf8))
    }

    /// The allocations as an aligned text table, one line each, with a header.
    /// With `nodes` (one name per item: a fleet's listing), a NODE column first.
    public static func table(_ items: [Item], nodes: [String]? = nil) -> String {
        var header = ["SESSION", "USER", "TRANSPORT", "CLIENT", "RELAYED", "AGE", "LEFT", "PERMS", "CHANS", "TO PEER", "TO CLIENT"]
        if nodes != nil { header.insert("NODE", at: 0) }
        let rows = items.enumerated().map { k, i in
            (nodes.map { [$0[k]] } ?? []) + [
                i.session, i.user, i.transport, i.client, i.relayed.joined(separator: ","), duration(i.age_seconds),
                duration(i.remaining_seconds), "\(i.permissions.count)", "\(i.channels.count)",
                bytes(i.traffic.bytes_to_peer), bytes(i.traffic.bytes_to_client),
            ]
        }
        var widths = header.map(\.count)
        for row in rows { for (k, cell) in row.enumerated() { widths[k] = max(widths[k], cell.count) } }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { k, cell in
                k == cells.count - 1 ? cell : cell.padding(toLength: widths[k], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
        return ([line(header)] + rows.map(line)).joined(separator: "\n") + "\n"
    }

    /// `59s`, `4m05s`, `2h03m`.
    public static func duration(_ seconds: Int) -> String {
        if seconds < 60 { return "\(seconds)s" }
        if seconds < 3600 { return "\(seconds / 60)m" + String(format: "%02ds", seconds % 60) }
        return "\(seconds / 3600)h" + String(format: "%02dm", (seconds % 3600) / 60)
    }

    /// `512B`, `1.5kB`, `3.2MB`, `1.1GB` (powers of 1000).
    public static func bytes(_ n: UInt64) -> String {
        if n < 1000 { return "\(n)B" }
        let units = ["kB", "MB", "GB", "TB"]
        var value = Double(n) / 1000
        var unit = 0
        while value >= 1000 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return String(format: "%.1f", value) + units[unit]
    }

    /// `90`, `90s`, `15m`, `2h`, `7d` as seconds; nil for anything else.
    public static func parseDuration(_ text: String) -> Int? {
        guard let last = text.last else { return nil }
        let factor: Int
        var digits = Substring(text)
        switch last {
        case "s": factor = 1
        case "m": factor = 60
        case "h": factor = 3600
        case "d": factor = 86400
        default:
            guard last.isASCII && last.isNumber else { return nil }
            factor = 1
        }
        if !last.isNumber { digits = digits.dropLast() }
        guard let n = Int(digits), n > 0 else { return nil }
        let (product, overflow) = n.multipliedReportingOverflow(by: factor)
        return overflow ? nil : product
    }
}
