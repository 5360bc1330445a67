/// SOURCE-ADDRESS: the address a classic Binding response was sent from (RFC 3489 §11.2.3),
/// coded like MAPPED-ADDRESS; RESPONSE-ORIGIN's predecessor.
public struct SourceAddress: AddressAttribute, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var isXORCoded: Bool { false }

    @inlinable
    public static var attributeType: AttributeType { .sourceAddress }
}
