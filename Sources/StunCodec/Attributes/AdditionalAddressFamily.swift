/// ADDITIONAL-ADDRESS-FAMILY: asks for a second relayed address of this family in a dual-stack
/// allocation, coded like REQUESTED-ADDRESS-FAMILY (RFC 8656 §18.11). Exactly 4 bytes, else
/// `.badAttributeLength`; an unknown family is `.badAttributeValue`. Only IPv6 is allowed here:
/// the server answers IPv4 with 400 (RFC 8656 §7.2).
public struct AdditionalAddressFamily: StunAttributeValue, Hashable {
    public var family: IPAddress.Family

    @inlinable
    public init(family: IPAddress.Family) { self.family = family }

    @inlinable
    public static var attributeType: AttributeType { .additionalAddressFamily }

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
