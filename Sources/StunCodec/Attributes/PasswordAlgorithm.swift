/// PASSWORD-ALGORITHM: the algorithm the client chose, from the server's PASSWORD-ALGORITHMS, to
/// derive the long-term key (RFC 8489 §14.12):
///
/// ```
/// |          Algorithm           |  Algorithm Parameters Length   |
/// |                    Algorithm Parameters (variable)
/// ```
///
/// The parameters are padded to 4 bytes like an attribute; padding bytes are ignored on
/// receipt. Also the element type of `PasswordAlgorithms`.
public struct PasswordAlgorithm: StunAttributeValue, Hashable {
    /// Algorithm number from the IANA registry (RFC 8489 §18.5).
    public var algorithm: UInt16
    public var parameters: [UInt8]

    /// MD5, no parameters (RFC 8489 §18.5).
    public static let md5 = PasswordAlgorithm(algorithm: 0x0001, parameters: [])
    /// SHA-256, no parameters (RFC 8489 §18.5).
    public static let sha256 = PasswordAlgorithm(algorithm: 0x0002, parameters: [])

    public init(algorithm: UInt16, parameters: [UInt8]) {
        self.algorithm = algorithm
        self.parameters = parameters
    }

    public static var attributeType: AttributeType { .passwordAlgorithm }

    /// Decodes the single algorithm that fills `value`; its padding may be present or not.
    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        var offset = 0
        self = try Self.decodeElement(value, at: &offset, type: Self.attributeType)
        guard offset == value.count else { throw .badAttributeLength(Self.attributeType) }
    }

    public var encodedLength: Int { 4 + parameters.count }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        encodeElement(into: value)
    }

    /// Bytes one entry occupies in a PASSWORD-ALGORITHMS list, parameters padded to 4.
    var paddedLength: Int { 4 + ((parameters.count + 3) & ~3) }

    /// Reads one algorithm at `offset` and moves `offset` past its padded parameters (or to the
    /// end of `value`, when the padding is left out there).
    static func decodeElement(_ value: UnsafeRawBufferPointer, at offset: inout Int, type: AttributeType)
        throws(StunDecodeError) -> PasswordAlgorithm
    {
        guard value.count - offset >= 4 else { throw .badAttributeLength(type) }
        let algorithm = value.loadUnaligned(fromByteOffset: offset, as: UInt16.self).bigEndian
        let length = Int(value.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self).bigEndian)
        let start = offset + 4
        guard value.count - start >= length else { throw .badAttributeLength(type) }
        let parameters = Array(UnsafeRawBufferPointer(rebasing: value[start..<start + length]))
        offset = min(start + ((length + 3) & ~3), value.count)
        return PasswordAlgorithm(algorithm: algorithm, parameters: parameters)
    }

    /// Writes the algorithm, the parameter length and the parameters; padding is the caller's.
    func encodeElement(into value: UnsafeMutableRawBufferPointer) {
        value.storeBytes(of: algorithm.bigEndian, as: UInt16.self)
        value.storeBytes(of: UInt16(truncatingIfNeeded: parameters.count).bigEndian, toByteOffset: 2, as: UInt16.self)
        ValueCoding.copy(parameters, into: UnsafeMutableRawBufferPointer(rebasing: value[4...]))
    }
}
