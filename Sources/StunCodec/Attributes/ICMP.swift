/// ICMP: an ICMP error the relay received for data it sent to a peer, passed to the client in a
/// Data indication (RFC 8656 §18.13):
///
/// ```
/// |          Reserved             |  ICMP Type    |  ICMP Code    |
/// |                          Error Data                           |
/// ```
///
/// Type and code are one byte each, as in ICMPv4 and ICMPv6 (the RFC's figure draws them
/// slightly off the byte boundary). Error Data carries the next-hop MTU for "packet too big" /
/// "fragmentation needed", else zero. Exactly 8 bytes, else `.badAttributeLength`.
public struct ICMP: StunAttributeValue, Hashable {
    public var type: UInt8
    public var code: UInt8
    public var errorData: UInt32

    @inlinable
    public init(type: UInt8, code: UInt8, errorData: UInt32) {
        self.type = type
        self.code = code
        self.errorData = errorData
    }

    @inlinable
    public static var attributeType: AttributeType { .icmp }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 8 else { throw .badAttributeLength(Self.attributeType) }
        type = value[2]
        code = value[3]
        errorData = value.loadUnaligned(fromByteOffset: 4, as: UInt32.self).bigEndian
    }

    @inlinable
    public var encodedLength: Int { 8 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: UInt16(0), as: UInt16.self)
        value[2] = type
        value[3] = code
        value.storeBytes(of: errorData.bigEndian, toByteOffset: 4, as: UInt32.self)
    }
}
