/// DATA: the application data of a Send or Data indication (RFC 8656 §18.4). Any length.
///
/// A copy, for the control path and tests; the relay's hot path reads and writes the bytes in
/// place through `StunMessage.attribute(.data)` and `StunMessageWriter.append(.data, value:)`.
public struct DataAttribute: StunAttributeValue, Hashable {
    public var bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public static var attributeType: AttributeType { .data }

    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        bytes = Array(value)
    }

    public var encodedLength: Int { bytes.count }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        ValueCoding.copy(bytes, into: value)
    }
}
