/// A typed attribute value: symmetric decode and encode of the bytes after the TLV header
/// (RFC 8489 §14). XOR-coded attributes need the transaction ID; the rest ignore it.
public protocol StunAttributeValue: Sendable {
    /// The attribute type this value is carried in.
    static var attributeType: AttributeType { get }

    /// Decodes the value bytes (no TLV header, no padding); throws only on malformed input.
    init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError)

    /// Number of value bytes `encode(into:transactionID:)` writes, before padding.
    var encodedLength: Int { get }

    /// Writes exactly `encodedLength` bytes into `value`.
    func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID)
}
