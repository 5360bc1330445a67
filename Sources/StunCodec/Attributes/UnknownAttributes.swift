/// UNKNOWN-ATTRIBUTES: the comprehension-required attribute types a 420 response did not
/// understand (RFC 8489 §14.13). A list of 16-bit types; an odd count is fine (normal attribute
/// padding replaced RFC 3489's duplicated last entry). An odd byte length is `.badAttributeLength`.
public struct UnknownAttributes: StunAttributeValue, Hashable {
    public var types: [AttributeType]

    public init(types: [AttributeType]) { self.types = types }

    public static var attributeType: AttributeType { .unknownAttributes }

    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count & 1 == 0 else { throw .badAttributeLength(Self.attributeType) }
        types = stride(from: 0, to: value.count, by: 2).map { offset in
            AttributeType(rawValue: value.loadUnaligned(fromByteOffset: offset, as: UInt16.self).bigEndian)
        }
    }

    public var encodedLength: Int { 2 * types.count }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        for (i, type) in types.enumerated() {
            value.storeBytes(of: type.rawValue.bigEndian, toByteOffset: 2 * i, as: UInt16.self)
        }
    }
}
