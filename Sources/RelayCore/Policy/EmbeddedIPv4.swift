import StunCodec

extension IPAddress {
    /// The IPv4 address an IPv6 address carries, so the peer policy judges where packets would
    /// really go: IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, 6to4 `2002:AABB:CCDD::/48`
    /// and NAT64 `64:ff9b::/96` (RFC 4291 §2.5.5, RFC 3056, RFC 6052). Others are returned unchanged.
    public var reducedToIPv4: IPAddress {
        guard family == .ipv6 else { return self }
        let top32 = UInt32(truncatingIfNeeded: low >> 32)
        let bottom32 = UInt32(truncatingIfNeeded: low)
        if high == 0 && top32 == 0xFFFF { return IPAddress(ipv4: bottom32) }
        if high == 0 && top32 == 0 && bottom32 > 1 { return IPAddress(ipv4: bottom32) }
        if high >> 48 == 0x2002 { return IPAddress(ipv4: UInt32(truncatingIfNeeded: high >> 16)) }
        if high == 0x0064_FF9B_0000_0000 && top32 == 0 { return IPAddress(ipv4: bottom32) }
        return self
    }
}
