/// One `node-labels` entry (`region=eu-west`): free-form, for callers of the credential service
/// to prefer nodes by (docs/cluster.md).
public struct NodeLabel: Sendable, Hashable, CustomStringConvertible {
    public var key: String
    public var value: String

    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }

    public var description: String { "\(key)=\(value)" }

    /// `region=eu-west,zone=a`; nil when a pair is not `token=token` or a key repeats.
    public static func parseList(_ text: String) -> [NodeLabel]? {
        var labels: [NodeLabel] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pair = part.trimmingSpaces
            guard let eq = pair.firstIndex(of: "=") else { return nil }
            let key = String(pair[..<eq])
            let value = String(pair[pair.index(after: eq)...])
            guard isToken(key), isToken(value), !labels.contains(where: { $0.key == key }) else { return nil }
            labels.append(NodeLabel(key: key, value: value))
        }
        return labels
    }

    /// Letters, digits, `-`, `_`, `.` and `/`, 1...64 of them: safe in Redis keys, URLs and logs.
    public static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                    || c == UInt8(ascii: "-") || c == UInt8(ascii: "_") || c == UInt8(ascii: ".")
                    || c == UInt8(ascii: "/")
            }
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var s = self
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return s
    }
}
