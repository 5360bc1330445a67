/// RESERVATION-TOKEN: names a relayed port the server holds back for a later Allocate, after an
/// EVEN-PORT request with the R bit (RFC 8656 §18.10). Exactly 8 bytes, else `.badAttributeLength`.
public struct ReservationToken: StunAttributeValue, Hashable {
    public var value: UInt64

    @inlinable
    public init(value: UInt64) { self.value = value }

    @inlinable
    public static var attributeType: AttributeType { .reservationToken }

    @inlinable
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count == 8 else { throw .badAttributeLength(Self.attributeType) }
        self.value = value.loadUnaligned(as: UInt64.self).bigEndian
    }

    @inlinable
    public var encodedLength: Int { 8 }

    @inlinable
    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: self.value.bigEndian, as: UInt64.self)
    }
}
