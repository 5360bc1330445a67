/// An ORIGIN value in the one form relayd compares (docs/tenants.md): scheme and host in lower
/// case and the port always written, as coturn keeps `turn_origin_to_realm` rows
/// (`https://app.example:443`), so `https://App.example` and `https://app.example:443` are one
/// origin (RFC 6454 §6.1 serializes the default port away; coturn writes it). A value that is
/// not `http(s)://host[:port]` is kept as given.
public enum WebOrigin {
    public static func normalized(_ value: String) -> String {
        let bytes = Array(value.utf8)
        guard let schemeEnd = find([0x3A, 0x2F, 0x2F], in: bytes) else { return value }  // "://"
        let scheme = String(decoding: bytes[..<schemeEnd], as: UTF8.self).lowercased()
        var rest = Array(bytes[(schemeEnd + 3)...])
        if rest.last == 0x2F { rest.removeLast() }
        guard !rest.isEmpty, !rest.contains(0x2F) else { return value }
        let defaultPort: String
        switch scheme {
        case "https": defaultPort = "443"
        case "http": defaultPort = "80"
        default: return value
        }
        // An IPv6 literal keeps its colons inside brackets.
        var hostEnd = 0
        if rest.first == 0x5B {
            guard let close = rest.firstIndex(of: 0x5D) else { return value }
            hostEnd = close + 1
        }
        if let colon = rest[hostEnd...].lastIndex(of: 0x3A) {
            let port = rest[(colon + 1)...]
            guard !port.isEmpty, port.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return value }
            let host = String(decoding: rest[..<colon], as: UTF8.self).lowercased()
            return "\(scheme)://\(host):\(String(decoding: port, as: UTF8.self))"
        }
        return "\(scheme)://\(String(decoding: rest, as: UTF8.self).lowercased()):\(defaultPort)"
    }

    private static func find(_ needle: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        for i in 0...(bytes.count - needle.count) where Array(bytes[i..<(i + needle.count)]) == needle { return i }
        return nil
    }
}
