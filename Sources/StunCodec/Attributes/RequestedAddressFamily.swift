/// REQUESTED-ADDRESS-FAMILY: the address family (0x01 IPv4, 0x02 IPv6) of the relayed address
/// asked for, followed by 24 RFFU bits (RFC 8656 §18.10). Exactly 4 bytes, else
/// `.badAttributeLength`; another family is `.badAttributeValue` (answered with 440).
public struct RequestedAddressFamily: StunAttributeValue, Hashable {
    public var family: IPAddress.Family

    @inlinable
    public init(family: IPAddress.Family) { self.family = family }

    @inlinable
    public static var attributeType: AttributeType { .requestedAddressFamily }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 4 else { throw .badAttributeLength(Self.attributeType) }
        guard let family = IPAddress.Family(rawValue: value[0]) else { throw .badAttributeValue(Self.attributeType) }
        self.family = family
    }

    @inlinable
    public var encodedLength: Int { 4 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: (UInt32(family.rawValue) << 24).bigEndian, as: UInt32.self)
    }
}
