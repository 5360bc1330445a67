/// An IP address and port: one end of a 5-tuple (RFC 8656 §2, "transport address").
public struct TransportAddress: Hashable, Sendable {
    public var ip: IPAddress
    public var port: UInt16

    @inlinable
    public init(ip: IPAddress, port: UInt16) {
        self.ip = ip
        self.port = port
    }

    /// Parses `1.2.3.4:5`, `[::1]:5`.
    public init?(_ text: some StringProtocol) {
        let s = Substring(text)
        if s.hasPrefix("[") {
            guard let close = s.firstIndex(of: "]") else { return nil }
            let host = s[s.index(after: s.startIndex)..<close]
            let rest = s[s.index(after: close)...]
            guard rest.hasPrefix(":"), let port = UInt16(rest.dropFirst()), let ip = IPAddress(host), ip.family == .ipv6
            else { return nil }
            self.init(ip: ip, port: port)
        } else {
            guard let colon = s.lastIndex(of: ":"), let port = UInt16(s[s.index(after: colon)...]),
                let ip = IPAddress(s[..<colon]), ip.family == .ipv4
            else { return nil }
            self.init(ip: ip, port: port)
        }
    }
}

extension TransportAddress: CustomStringConvertible {
    public var description: String {
        ip.family == .ipv4 ? "\(ip):\(port)" : "[\(ip)]:\(port)"
    }
}
