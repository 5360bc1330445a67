/// ADDITIONAL-ADDRESS-FAMILY: asks for a second relayed address of this family in a dual-stack
/// allocation, coded like REQUESTED-ADDRESS-FAMILY (RFC 8656 §18.11). Exactly 4 bytes, else
/// `.badAttributeLength`; an unknown family is `.badAttributeValue`. Only IPv6 is allowed here:
/// the server answers IPv4 with 400 (RFC 8656 §7.2).
public struct AdditionalAddressFamily: AddressFamilyAttribute, Hashable {
    public var family: IPAddress.Family

    @inlinable
    public init(family: IPAddress.Family) { self.family = family }

    @inlinable
    public static var attributeType: AttributeType { .additionalAddressFamily }
}
