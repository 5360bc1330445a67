/// USE-CANDIDATE: the controlling agent nominates the candidate pair this check is sent on
/// (RFC 8445 §7.1.2, §16.1). Empty; any value bytes are `.badAttributeLength`.
public struct UseCandidate: StunAttributeValue, Hashable {
    @inlinable
    public init() {}

    @inlinable
    public static var attributeType: AttributeType { .useCandidate }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 0 else { throw .badAttributeLength(Self.attributeType) }
    }

    @inlinable
    public var encodedLength: Int { 0 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {}
}
