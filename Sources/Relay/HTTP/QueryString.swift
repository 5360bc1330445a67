/// `application/x-www-form-urlencoded` query parsing (WHATWG URL §5.1): `&`-separated
/// `name=value` pairs, `+` for space, `%XX` escapes, UTF-8.
public enum QueryString {
    /// The pairs in order; nil when an escape is malformed or the bytes are not UTF-8.
    public static func parse(_ query: String) -> [(name: String, value: String)]? {
        var pairs: [(name: String, value: String)] = []
        for part in query.split(separator: "&", omittingEmptySubsequences: true) {
            let name: Substring
            let value: Substring
            if let eq = part.firstIndex(of: "=") {
                name = part[..<eq]
                value = part[part.index(after: eq)...]
            } else {
                name = part
                value = ""
            }
            guard let n = decode(name), let v = decode(value) else { return nil }
            pairs.append((n, v))
        }
        return pairs
    }

    /// Percent-decodes one name or value; nil on a bad escape or invalid UTF-8. `plusIsSpace`
    /// false decodes as RFC 3986 §2.1 does elsewhere in a URL (a URL's user and password).
    public static func decode(_ text: Substring, plusIsSpace: Bool = true) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var it = text.utf8.makeIterator()
        while let b = it.next() {
            switch b {
            case UInt8(ascii: "+") where plusIsSpace:
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let h = it.next().flatMap(hexValue), let l = it.next().flatMap(hexValue) else { return nil }
                bytes.append(h << 4 | l)
            default:
                bytes.append(b)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
