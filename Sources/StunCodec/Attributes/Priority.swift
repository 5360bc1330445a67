/// PRIORITY: the priority a peer-reflexive candidate learnt from this check would get
/// (RFC 8445 §7.1.1, §16.1). Exactly 4 bytes, else `.badAttributeLength`.
public struct Priority: StunAttributeValue, Hashable {
    public var value: UInt32

    @inlinable
    public init(value: UInt32) { self.value = value }

    @inlinable
    public static var attributeType: AttributeType { .priority }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 4 else { throw .badAttributeLength(Self.attributeType) }
        self.value = value.loadUnaligned(as: UInt32.self).bigEndian
    }

    @inlinable
    public var encodedLength: Int { 4 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: self.value.bigEndian, as: UInt32.self)
    }
}
