/// REQUESTED- and ADDITIONAL-ADDRESS-FAMILY: one family byte (0x01 IPv4, 0x02 IPv6) followed
/// by 24 RFFU bits (RFC 8656 §18.6, §18.11). Exactly 4 bytes, else `.badAttributeLength`; an
/// unknown family is `.badAttributeValue`.
public protocol AddressFamilyAttribute: StunAttributeValue {
    var family: IPAddress.Family { get }
    init(family: IPAddress.Family)
}

extension AddressFamilyAttribute {
    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 4 else { throw .badAttributeLength(Self.attributeType) }
        guard let family = IPAddress.Family(rawValue: value[0]) else { throw .badAttributeValue(Self.attributeType) }
        self.init(family: family)
    }

    @inlinable
    public var encodedLength: Int { 4 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: (UInt32(family.rawValue) << 24).bigEndian, as: UInt32.self)
    }
}
