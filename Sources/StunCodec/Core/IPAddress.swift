/// An IPv4 or IPv6 address stored inline in 17 bytes of plain integers: no heap, cheap to hash.
///
/// IPv4 addresses keep their four bytes in the low 32 bits of `low`; `high` is zero.
/// IPv6 addresses keep bytes 0–7 in `high` and 8–15 in `low`, big-endian order.
public struct IPAddress: Hashable, Sendable, Comparable {
    public enum Family: UInt8, Sendable, Hashable {
        /// Address family values of RFC 8489 §14.1 and RFC 8656 §18.
        case ipv4 = 0x01
        case ipv6 = 0x02
    }

    // `family` last: the struct is then 17 bytes, so a TransportAddress (with its port) fits
    // in 24 and a FiveTuple in 48 (docs/benchmark.md, "Node capacity").
    public let high: UInt64
    public let low: UInt64
    public let family: Family

    @inlinable
    public init(ipv4 value: UInt32) {
        family = .ipv4
        high = 0
        low = UInt64(value)
    }

    @inlinable
    public init(ipv6High high: UInt64, low: UInt64) {
        family = .ipv6
        self.high = high
        self.low = low
    }

    /// The IPv4 value (host order) when this is an IPv4 address.
    @inlinable
    public var ipv4Value: UInt32? { family == .ipv4 ? UInt32(truncatingIfNeeded: low) : nil }

    /// Number of address bytes on the wire: 4 or 16.
    @inlinable
    public var byteCount: Int { family == .ipv4 ? 4 : 16 }

    /// Byte `index` of the address in network order.
    @inlinable
    public func byte(_ index: Int) -> UInt8 {
        switch family {
        case .ipv4:
            return UInt8(truncatingIfNeeded: low >> UInt64(8 * (3 - index)))
        case .ipv6:
            if index < 8 { return UInt8(truncatingIfNeeded: high >> UInt64(8 * (7 - index))) }
            return UInt8(truncatingIfNeeded: low >> UInt64(8 * (15 - index)))
        }
    }

    /// Builds an address from 4 or 16 bytes in network order.
    @inlinable
    public init?(bytes: UnsafeRawBufferPointer) {
        switch bytes.count {
        case 4:
            var v: UInt32 = 0
            for i in 0..<4 { v = v << 8 | UInt32(bytes[i]) }
            self.init(ipv4: v)
        case 16:
            var h: UInt64 = 0
            var l: UInt64 = 0
            for i in 0..<8 { h = h << 8 | UInt64(bytes[i]) }
            for i in 8..<16 { l = l << 8 | UInt64(bytes[i]) }
            self.init(ipv6High: h, low: l)
        default:
            return nil
        }
    }

    public static func < (a: IPAddress, b: IPAddress) -> Bool {
        if a.family != b.family { return a.family.rawValue < b.family.rawValue }
        if a.high != b.high { return a.high < b.high }
        return a.low < b.low
    }

    public static let ipv4Any = IPAddress(ipv4: 0)
    public static let ipv6Any = IPAddress(ipv6High: 0, low: 0)
    public static let ipv4Loopback = IPAddress(ipv4: 0x7F00_0001)
    public static let ipv6Loopback = IPAddress(ipv6High: 0, low: 1)

    /// 127.0.0.0/8 or ::1 (RFC 6890 §2.2.2, §2.2.3).
    @inlinable
    public var isLoopback: Bool {
        if let v4 = ipv4Value { return v4 >> 24 == 127 }
        return self == .ipv6Loopback
    }

    /// 0.0.0.0 or :: : "every address of this host" as a listening address.
    @inlinable
    public var isWildcard: Bool { self == .ipv4Any || self == .ipv6Any }
}

extension IPAddress: CustomStringConvertible {
    /// Dotted quad for IPv4; RFC 5952 canonical text (lowercase, longest zero run compressed,
    /// IPv4-mapped addresses in mixed notation) for IPv6.
    public var description: String {
        switch family {
        case .ipv4:
            return "\(byte(0)).\(byte(1)).\(byte(2)).\(byte(3))"
        case .ipv6:
            if high == 0, low >> 32 == 0xFFFF {
                // RFC 5952 §5: IPv4-mapped addresses are written in mixed notation.
                return "::ffff:\(byte(12)).\(byte(13)).\(byte(14)).\(byte(15))"
            }
            var groups = [UInt16](repeating: 0, count: 8)
            for i in 0..<8 { groups[i] = UInt16(byte(2 * i)) << 8 | UInt16(byte(2 * i + 1)) }
            var bestStart = -1
            var bestLength = 0
            var i = 0
            while i < 8 {
                if groups[i] == 0 {
                    var j = i
                    while j < 8 && groups[j] == 0 { j += 1 }
                    if j - i > bestLength && j - i >= 2 { bestStart = i; bestLength = j - i }
                    i = j
                } else {
                    i += 1
                }
            }
            var text = ""
            i = 0
            while i < 8 {
                if i == bestStart {
                    text += "::"
                    i += bestLength
                    continue
                }
                if !text.isEmpty && !text.hasSuffix(":") { text += ":" }
                text += String(groups[i], radix: 16)
                i += 1
            }
            return text
        }
    }
}

extension IPAddress {
    /// Parses dotted-quad IPv4 or RFC 4291 §2.2 IPv6 text (with `::` and an optional trailing dotted quad).
    /// Brackets and zone identifiers are not accepted.
    public init?(_ text: some StringProtocol) {
        if let v4 = IPAddress.parseIPv4(Substring(text)) {
            self.init(ipv4: v4)
        } else if let (h, l) = IPAddress.parseIPv6(Substring(text)) {
            self.init(ipv6High: h, low: l)
        } else {
            return nil
        }
    }

    static func parseIPv4(_ text: Substring) -> UInt32? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var value: UInt32 = 0
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy({ $0.isASCII && $0.isNumber }),
                let octet = UInt32(part), octet <= 255
            else { return nil }
            if part.count > 1 && part.first == "0" { return nil }
            value = value << 8 | octet
        }
        return value
    }

    static func parseIPv6(_ text: Substring) -> (UInt64, UInt64)? {
        guard text.contains(":"), text.utf8.count <= 45 else { return nil }
        let halves = text.components(separatedByDoubleColon: ())
        guard halves.count <= 2 else { return nil }
        guard let head = parseGroups(halves[0], allowTrailingIPv4: halves.count == 1) else { return nil }
        var groups = head
        if halves.count == 2 {
            guard let tail = parseGroups(halves[1], allowTrailingIPv4: true), head.count + tail.count <= 7
            else { return nil }
            groups += [UInt16](repeating: 0, count: 8 - head.count - tail.count) + tail
        }
        guard groups.count == 8 else { return nil }
        var h: UInt64 = 0
        var l: UInt64 = 0
        for i in 0..<4 { h = h << 16 | UInt64(groups[i]) }
        for i in 4..<8 { l = l << 16 | UInt64(groups[i]) }
        return (h, l)
    }

    /// Colon-separated hex groups; the last may be a dotted quad (two groups).
    private static func parseGroups(_ text: Substring, allowTrailingIPv4: Bool) -> [UInt16]? {
        if text.isEmpty { return [] }
        let pieces = text.split(separator: ":", omittingEmptySubsequences: false)
        var groups: [UInt16] = []
        for (i, piece) in pieces.enumerated() {
            if i == pieces.count - 1, allowTrailingIPv4, piece.contains(".") {
                guard let v4 = parseIPv4(piece) else { return nil }
                groups += [UInt16(v4 >> 16), UInt16(v4 & 0xFFFF)]
            } else {
                // `UInt16(_:radix:)` alone would also accept a sign ("+1", "-0").
                guard !piece.isEmpty, piece.utf8.count <= 4, piece.utf8.allSatisfy(\.isASCIIHexDigit),
                    let g = UInt16(piece, radix: 16)
                else { return nil }
                groups.append(g)
            }
        }
        return groups
    }
}

extension Substring {
    /// Splits at each "::" (for IPv6 text); more than one "::" yields more than two parts.
    fileprivate func components(separatedByDoubleColon _: Void) -> [Substring] {
        var parts: [Substring] = []
        var start = startIndex
        var i = startIndex
        while i < endIndex {
            let next = index(after: i)
            if self[i] == ":", next < endIndex, self[next] == ":" {
                parts.append(self[start..<i])
                start = index(after: next)
                i = start
            } else {
                i = next
            }
        }
        parts.append(self[start..<endIndex])
        return parts
    }
}

extension UInt8 {
    /// `0-9`, `a-f`, `A-F`.
    fileprivate var isASCIIHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}
