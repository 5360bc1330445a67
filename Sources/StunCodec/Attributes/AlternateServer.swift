/// ALTERNATE-SERVER: a different server the client should try, coded like MAPPED-ADDRESS
/// (RFC 8489 §14.15).
public struct AlternateServer: StunAttributeValue, Hashable {
    public var address: TransportAddress

    @inlinable
    public init(address: TransportAddress) { self.address = address }

    @inlinable
    public static var attributeType: AttributeType { .alternateServer }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        address = try AddressCoding.decode(value, type: Self.attributeType, xor: nil)
    }

    @inlinable
    public var encodedLength: Int { AddressCoding.encodedLength(address) }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        AddressCoding.encode(address, into: value, xor: nil)
    }
}
