/// A small JSON writer that keeps keys in the order written, so responses come out byte for
/// byte in the shapes docs/compatibility.md describes (Foundation's `JSONEncoder` orders keys by hash on Linux).
public struct JSONWriter: Sendable {
    public private(set) var text = ""
    private var needsComma = false

    public init() {}

    public mutating func object(_ body: (inout JSONWriter) -> Void) {
        separate()
        text += "{"
        needsComma = false
        body(&self)
        text += "}"
        needsComma = true
    }

    public mutating func array(_ body: (inout JSONWriter) -> Void) {
        separate()
        text += "["
        needsComma = false
        body(&self)
        text += "]"
        needsComma = true
    }

    /// `"key":` inside an object; the value follows.
    public mutating func key(_ key: String) {
        separate()
        text += Self.quoted(key) + ":"
        needsComma = false
    }

    public mutating func field(_ key: String, _ value: String) {
        self.key(key)
        self.value(value)
    }

    public mutating func field(_ key: String, _ value: Int) {
        self.key(key)
        self.value(value)
    }

    public mutating func field(_ key: String, strings: [String]) {
        self.key(key)
        array { a in for s in strings { a.value(s) } }
    }

    public mutating func value(_ s: String) {
        separate()
        text += Self.quoted(s)
        needsComma = true
    }

    public mutating func value(_ n: Int) {
        separate()
        text += "\(n)"
        needsComma = true
    }

    /// A value already in JSON form (a number, `true`, `false`).
    public mutating func raw(_ json: String) {
        separate()
        text += json
        needsComma = true
    }

    private mutating func separate() {
        if needsComma { text += "," }
    }

    /// A JSON string literal (RFC 8259 §7): quote, backslash and control characters escaped.
    public static func quoted(_ s: String) -> String {
        var out = "\""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if c.value < 0x20 {
                    let hex = String(c.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(c)
                }
            }
        }
        return out + "\""
    }
}
