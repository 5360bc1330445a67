/// RESPONSE-ORIGIN: the address the response was sent from, coded like MAPPED-ADDRESS
/// (RFC 5780 §7.3).
public struct ResponseOrigin: AddressAttribute, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var isXORCoded: Bool { false }

    @inlinable
    public static var attributeType: AttributeType { .responseOrigin }
}
