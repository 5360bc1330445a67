/// The transport-address value shared by MAPPED-ADDRESS, XOR-MAPPED-ADDRESS and their kin
/// (RFC 8489 §14.1, §14.2):
///
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |0 0 0 0 0 0 0 0|    Family     |         (X-)Port              |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |              (X-)Address (32 bits or 128 bits)                |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// ```
///
/// The first byte is sent as zero and ignored on receipt (§14.1). The XOR form XORs the port
/// with the cookie's top 16 bits, an IPv4 address with the cookie, and an IPv6 address with
/// the cookie followed by the transaction ID (§14.2).
@usableFromInline
enum AddressCoding {
    /// Value bytes for `address`: 8 for IPv4, 20 for IPv6.
    @inlinable
    static func encodedLength(_ address: TransportAddress) -> Int { 4 + address.ip.byteCount }

    /// Decodes the plain form, or the XOR form when `transactionID` is given.
    ///
    /// An unknown family is `.badAttributeValue`; a length other than 8 (IPv4) or 20 (IPv6)
    /// is `.badAttributeLength`.
    @inlinable
    static func decode(
        _ value: UnsafeRawBufferPointer, type: AttributeType, xor transactionID: TransactionID?
    ) throws(StunDecodeError) -> TransportAddress {
        guard value.count >= 4 else { throw .badAttributeLength(type) }
        guard let family = IPAddress.Family(rawValue: value[1]) else { throw .badAttributeValue(type) }
        var port = value.loadUnaligned(fromByteOffset: 2, as: UInt16.self).bigEndian
        let ip: IPAddress
        switch family {
        case .ipv4:
            guard value.count == 8 else { throw .badAttributeLength(type) }
            var v4 = value.loadUnaligned(fromByteOffset: 4, as: UInt32.self).bigEndian
            if transactionID != nil { v4 ^= StunConstants.magicCookie }
            ip = IPAddress(ipv4: v4)
        case .ipv6:
            guard value.count == 20 else { throw .badAttributeLength(type) }
            var high = value.loadUnaligned(fromByteOffset: 4, as: UInt64.self).bigEndian
            var low = value.loadUnaligned(fromByteOffset: 12, as: UInt64.self).bigEndian
            if let id = transactionID {
                high ^= UInt64(StunConstants.magicCookie) << 32 | UInt64(id.high)
                low ^= id.low
            }
            ip = IPAddress(ipv6High: high, low: low)
        }
        if transactionID != nil { port ^= UInt16(truncatingIfNeeded: StunConstants.magicCookie >> 16) }
        return TransportAddress(ip: ip, port: port)
    }

    /// Writes `encodedLength(address)` bytes: the plain form, or the XOR form when
    /// `transactionID` is given.
    @inlinable
    static func encode(
        _ address: TransportAddress, into value: UnsafeMutableRawBufferPointer, xor transactionID: TransactionID?
    ) {
        var port = address.port
        if transactionID != nil { port ^= UInt16(truncatingIfNeeded: StunConstants.magicCookie >> 16) }
        value[0] = 0
        value[1] = address.ip.family.rawValue
        value.storeBytes(of: port.bigEndian, toByteOffset: 2, as: UInt16.self)
        switch address.ip.family {
        case .ipv4:
            var v4 = UInt32(truncatingIfNeeded: address.ip.low)
            if transactionID != nil { v4 ^= StunConstants.magicCookie }
            value.storeBytes(of: v4.bigEndian, toByteOffset: 4, as: UInt32.self)
        case .ipv6:
            var high = address.ip.high
            var low = address.ip.low
            if let id = transactionID {
                high ^= UInt64(StunConstants.magicCookie) << 32 | UInt64(id.high)
                low ^= id.low
            }
            value.storeBytes(of: high.bigEndian, toByteOffset: 4, as: UInt64.self)
            value.storeBytes(of: low.bigEndian, toByteOffset: 12, as: UInt64.self)
        }
    }
}
