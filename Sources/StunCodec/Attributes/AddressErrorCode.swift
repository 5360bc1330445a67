/// ADDRESS-ERROR-CODE: why the server did not allocate a relayed address of `family` in a
/// dual-stack Allocate (RFC 8656 §18.12), coded like ERROR-CODE with the family in byte 0:
///
/// ```
/// |  Family       |    Reserved             |Class|     Number    |
/// |      Reason Phrase (variable)                                ..
/// ```
///
/// An unknown family, class outside 3–6 or number over 99 is `.badAttributeValue`.
public struct AddressErrorCode: StunAttributeValue, Hashable {
    public var family: IPAddress.Family
    /// The code: class × 100 + number, e.g. 440.
    public var code: Int
    public var reason: String

    public init(family: IPAddress.Family, code: Int, reason: String) {
        self.family = family
        self.code = code
        self.reason = reason
    }

    /// The family with the code and reason of `error`.
    public init(family: IPAddress.Family, error: ErrorCode) {
        self.init(family: family, code: error.code, reason: error.reason)
    }

    public static var attributeType: AttributeType { .addressErrorCode }

    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        guard value.count >= 4 else { throw .badAttributeLength(Self.attributeType) }
        guard let family = IPAddress.Family(rawValue: value[0]) else { throw .badAttributeValue(Self.attributeType) }
        let (code, reason) = try ErrorCodeCoding.decode(value, type: Self.attributeType)
        self.init(family: family, code: code, reason: reason)
    }

    public var encodedLength: Int { 4 + reason.utf8.count }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value[0] = family.rawValue
        value[1] = 0
        ErrorCodeCoding.encode(code: code, reason: reason, into: value)
    }
}
