/// UTF-8 text values (USERNAME, REALM, NONCE, SOFTWARE, reason phrases; RFC 8489 §14) and
/// the copying of byte-array values, shared by the attribute types.
@usableFromInline
enum ValueCoding {
    /// Decodes `value` as UTF-8 of at most `maxBytes` bytes (else `.badAttributeLength`) and, when
    /// given, fewer than `maxCharacters` Unicode scalars (else `.badAttributeValue`).
    /// Ill-formed UTF-8 is `.badAttributeValue`: the text must survive a round trip unchanged.
    static func decodeText(
        _ value: UnsafeRawBufferPointer, type: AttributeType, maxBytes: Int, maxCharacters: Int? = nil
    ) throws(StunDecodeError) -> String {
        guard value.count <= maxBytes else { throw .badAttributeLength(type) }
        var scalars = 0
        var iterator = value.makeIterator()
        var decoder = UTF8()
        decoding: while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: scalars += 1
            case .emptyInput: break decoding
            case .error: throw .badAttributeValue(type)
            }
        }
        if let maxCharacters, scalars >= maxCharacters { throw .badAttributeValue(type) }
        return String(decoding: value, as: UTF8.self)
    }

    /// Decodes `value` as ASCII of at most `maxBytes` bytes (ALTERNATE-DOMAIN, RFC 8489 §14.16).
    static func decodeASCII(_ value: UnsafeRawBufferPointer, type: AttributeType, maxBytes: Int)
        throws(StunDecodeError) -> String
    {
        guard value.count <= maxBytes else { throw .badAttributeLength(type) }
        guard value.allSatisfy({ $0 < 0x80 }) else { throw .badAttributeValue(type) }
        return String(decoding: value, as: UTF8.self)
    }

    /// Writes the UTF-8 bytes of `text` at the start of `value`.
    static func encodeText(_ text: String, into value: UnsafeMutableRawBufferPointer) {
        var text = text
        text.withUTF8 { utf8 in
            if utf8.count > 0 { value.copyMemory(from: UnsafeRawBufferPointer(utf8)) }
        }
    }

    /// Writes `bytes` at the start of `value`.
    @inlinable
    static func copy(_ bytes: [UInt8], into value: UnsafeMutableRawBufferPointer) {
        bytes.withUnsafeBytes { source in
            if source.count > 0 { value.copyMemory(from: source) }
        }
    }
}
