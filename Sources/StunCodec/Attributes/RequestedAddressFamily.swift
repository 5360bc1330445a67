/// REQUESTED-ADDRESS-FAMILY: the address family (0x01 IPv4, 0x02 IPv6) of the relayed address
/// asked for, followed by 24 RFFU bits (RFC 8656 §18.6). Exactly 4 bytes, else
/// `.badAttributeLength`; another family is `.badAttributeValue` (answered with 440).
public struct RequestedAddressFamily: AddressFamilyAttribute, Hashable {
    public var family: IPAddress.Family

    @inlinable
    public init(family: IPAddress.Family) { self.family = family }

    @inlinable
    public static var attributeType: AttributeType { .requestedAddressFamily }
}
