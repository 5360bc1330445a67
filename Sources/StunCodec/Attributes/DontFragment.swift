/// DONT-FRAGMENT: asks the server to set the DF bit on packets it relays to peers
/// (RFC 8656 §18.12). Empty; any value bytes are `.badAttributeLength`.
public struct DontFragment: StunAttributeValue, Hashable {
    @inlinable
    public init() {}

    @inlinable
    public static var attributeType: AttributeType { .dontFragment }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 0 else { throw .badAttributeLength(Self.attributeType) }
    }

    @inlinable
    public var encodedLength: Int { 0 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {}
}
