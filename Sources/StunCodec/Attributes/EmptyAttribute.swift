/// An attribute whose presence is its meaning and whose value is empty (DONT-FRAGMENT,
/// RFC 8656 §18.9; USE-CANDIDATE, RFC 8445 §16.1). Any value bytes are `.badAttributeLength`.
public protocol EmptyAttribute: StunAttributeValue {
    init()
}

extension EmptyAttribute {
    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 0 else { throw .badAttributeLength(Self.attributeType) }
        self.init()
    }

    @inlinable
    public var encodedLength: Int { 0 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {}
}
