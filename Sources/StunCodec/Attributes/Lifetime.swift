/// LIFETIME: seconds until the allocation expires, asked for in Allocate/Refresh requests and
/// granted in their responses; 0 in a Refresh deletes the allocation (RFC 8656 §18.2).
/// Exactly 4 bytes, else `.badAttributeLength`.
public struct Lifetime: StunAttributeValue, Hashable {
    public var seconds: UInt32

    @inlinable
    public init(seconds: UInt32) { self.seconds = seconds }

    @inlinable
    public static var attributeType: AttributeType { .lifetime }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 4 else { throw .badAttributeLength(Self.attributeType) }
        seconds = value.loadUnaligned(as: UInt32.self).bigEndian
    }

    @inlinable
    public var encodedLength: Int { 4 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: seconds.bigEndian, as: UInt32.self)
    }
}
