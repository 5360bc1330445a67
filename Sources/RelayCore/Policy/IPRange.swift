import StunCodec

/// An inclusive range of addresses of one family, as written in coturn's
/// `denied-peer-ip` / `allowed-peer-ip`: `a-b`, a CIDR prefix, or one address.
///
/// Ranges need not be prefix-aligned: `10.0.0.5-10.0.0.9` holds exactly five addresses.
public struct IPRange: Hashable, Sendable {
    /// The first address in the range.
    public let lower: IPAddress
    /// The last address in the range; same family as `lower`, never below it.
    public let upper: IPAddress

    /// A range from `lower` through `upper`; nil when the families differ or `lower > upper`.
    public init?(lower: IPAddress, upper: IPAddress) {
        guard lower.family == upper.family, lower <= upper else { return nil }
        self.lower = lower
        self.upper = upper
    }

    /// The range holding only `address`.
    public init(_ address: IPAddress) {
        lower = address
        upper = address
    }

    /// The addresses sharing the first `prefixLength` bits of `address` (host bits of
    /// `address` are ignored); nil when the length exceeds 32 (IPv4) or 128 (IPv6).
    public init?(address: IPAddress, prefixLength: Int) {
        let bits = address.family == .ipv4 ? 32 : 128
        guard (0...bits).contains(prefixLength) else { return nil }
        let host = HostMask(hostBits: bits - prefixLength)
        switch address.family {
        case .ipv4:
            let value = UInt32(truncatingIfNeeded: address.low)
            let mask = UInt32(truncatingIfNeeded: host.low)
            lower = IPAddress(ipv4: value & ~mask)
            upper = IPAddress(ipv4: value | mask)
        case .ipv6:
            lower = IPAddress(ipv6High: address.high & ~host.high, low: address.low & ~host.low)
            upper = IPAddress(ipv6High: address.high | host.high, low: address.low | host.low)
        }
    }

    /// Parses `a-b` (both ends inclusive, same family, `a <= b`), `address/prefix` or a single address.
    public init?(_ text: some StringProtocol) {
        let text = Substring(text)
        if let dash = text.firstIndex(of: "-") {
            guard let a = IPAddress(text[..<dash]), let b = IPAddress(text[text.index(after: dash)...]) else {
                return nil
            }
            self.init(lower: a, upper: b)
        } else if let slash = text.firstIndex(of: "/") {
            let digits = text[text.index(after: slash)...]
            guard let address = IPAddress(text[..<slash]), !digits.isEmpty, digits.utf8.count <= 3,
                digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let length = Int(digits)
            else { return nil }
            self.init(address: address, prefixLength: length)
        } else {
            guard let address = IPAddress(text) else { return nil }
            self.init(address)
        }
    }

    /// The address family of both ends.
    public var family: IPAddress.Family { lower.family }

    /// True when `ip` has this range's family and lies between `lower` and `upper` inclusive.
    public func contains(_ ip: IPAddress) -> Bool {
        ip.family == lower.family && lower <= ip && ip <= upper
    }

    /// The prefix length when the range is exactly one CIDR block, else nil.
    public var prefixLength: Int? {
        let spanHigh = lower.high ^ upper.high
        let spanLow = lower.low ^ upper.low
        let hostBits: Int
        if spanHigh == 0 {
            guard spanLow & (spanLow &+ 1) == 0 else { return nil }
            hostBits = UInt64.bitWidth - spanLow.leadingZeroBitCount
        } else {
            guard spanLow == .max, spanHigh & (spanHigh &+ 1) == 0 else { return nil }
            hostBits = 2 * UInt64.bitWidth - spanHigh.leadingZeroBitCount
        }
        guard lower.high & spanHigh == 0, lower.low & spanLow == 0 else { return nil }
        return (family == .ipv4 ? 32 : 128) - hostBits
    }
}

extension IPRange: CustomStringConvertible {
    /// A single address, `address/prefix` for a CIDR block, else `lower-upper`.
    public var description: String {
        if lower == upper { return "\(lower)" }
        if let length = prefixLength { return "\(lower)/\(length)" }
        return "\(lower)-\(upper)"
    }
}

/// The host part of a prefix as a 128-bit mask split like `IPAddress` storage.
private struct HostMask {
    var high: UInt64
    var low: UInt64

    init(hostBits: Int) {
        if hostBits >= 64 {
            low = .max
            high = hostBits >= 128 ? .max : (UInt64(1) << UInt64(hostBits - 64)) - 1
        } else {
            low = hostBits == 0 ? 0 : (UInt64(1) << UInt64(hostBits)) - 1
            high = 0
        }
    }
}
