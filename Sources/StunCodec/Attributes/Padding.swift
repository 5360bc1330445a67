/// PADDING: filler that makes a Binding request or response larger, for path MTU tests
/// (RFC 5780 §7.6). Any length; the content is meaningless (senders use zeros).
public struct Padding: StunAttributeValue, Hashable {
    public var bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// `count` zero bytes.
    public init(count: Int) { bytes = [UInt8](repeating: 0, count: count) }

    public static var attributeType: AttributeType { .padding }

    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        bytes = Array(value)
    }

    public var encodedLength: Int { bytes.count }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        ValueCoding.copy(bytes, into: value)
    }
}
