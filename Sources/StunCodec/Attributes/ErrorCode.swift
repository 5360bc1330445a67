/// ERROR-CODE: a numeric code 300–699 and a UTF-8 reason phrase (RFC 8489 §14.8):
///
/// ```
/// |           Reserved, should be 0         |Class|     Number    |
/// |      Reason Phrase (variable)                                ..
/// ```
///
/// Decoding checks class 3–6 and number 0–99 (else `.badAttributeValue`), a value of at least
/// 4 and at most 4 + 763 bytes (else `.badAttributeLength`), and well-formed UTF-8.
public struct ErrorCode: StunAttributeValue, Hashable {
    /// The code: class × 100 + number, e.g. 401.
    public var code: Int
    public var reason: String

    /// Longest reason phrase accepted on receipt, in bytes (RFC 8489 §14.8).
    public static let maxReasonBytes = 763

    public init(code: Int, reason: String) {
        self.code = code
        self.reason = reason
    }

    /// The hundreds digit, 3–6.
    public var errorClass: Int { code / 100 }
    /// The code modulo 100.
    public var number: Int { code % 100 }

    public static var attributeType: AttributeType { .errorCode }

    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        let (code, reason) = try ErrorCodeCoding.decode(value, type: Self.attributeType)
        self.init(code: code, reason: reason)
    }

    public var encodedLength: Int { 4 + reason.utf8.count }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        value.storeBytes(of: UInt16(0), as: UInt16.self)
        ErrorCodeCoding.encode(code: code, reason: reason, into: value)
    }
}

extension ErrorCode {
    /// 300: contact the server in ALTERNATE-SERVER instead (RFC 8489 §14.8).
    public static let tryAlternate = ErrorCode(code: 300, reason: "Try Alternate")
    /// 400: the request was malformed (RFC 8489 §14.8).
    public static let badRequest = ErrorCode(code: 400, reason: "Bad Request")
    /// 401: the request lacks correct credentials (RFC 8489 §14.8).
    public static let unauthenticated = ErrorCode(code: 401, reason: "Unauthenticated")
    /// 403: the request was valid but is not allowed, e.g. a denied peer (RFC 8656 §19).
    public static let forbidden = ErrorCode(code: 403, reason: "Forbidden")
    /// 420: a comprehension-required attribute was not understood; list it in UNKNOWN-ATTRIBUTES
    /// (RFC 8489 §14.8).
    public static let unknownAttribute = ErrorCode(code: 420, reason: "Unknown Attribute")
    /// 437: the request does not fit the allocation state of its 5-tuple (RFC 8656 §19).
    public static let allocationMismatch = ErrorCode(code: 437, reason: "Allocation Mismatch")
    /// 438: the NONCE is no longer valid; retry with the one in this response (RFC 8489 §14.8).
    public static let staleNonce = ErrorCode(code: 438, reason: "Stale Nonce")
    /// 440: the server does not support the requested address family (RFC 8656 §19).
    public static let addressFamilyNotSupported = ErrorCode(code: 440, reason: "Address Family not Supported")
    /// 441: the credentials differ from those that created the allocation (RFC 8656 §19).
    public static let wrongCredentials = ErrorCode(code: 441, reason: "Wrong Credentials")
    /// 442: the server does not support the REQUESTED-TRANSPORT (RFC 8656 §19).
    public static let unsupportedTransportProtocol = ErrorCode(code: 442, reason: "Unsupported Transport Protocol")
    /// 443: the peer address family differs from the relayed address's (RFC 8656 §19).
    public static let peerAddressFamilyMismatch = ErrorCode(code: 443, reason: "Peer Address Family Mismatch")
    /// 446: a TCP connection to this peer already exists (RFC 6062 §6.3).
    public static let connectionAlreadyExists = ErrorCode(code: 446, reason: "Connection Already Exists")
    /// 447: the TCP connection to the peer could not be made (RFC 6062 §6.3).
    public static let connectionTimeoutOrFailure = ErrorCode(code: 447, reason: "Connection Timeout or Failure")
    /// 486: the user has reached their allocation quota (RFC 8656 §19).
    public static let allocationQuotaReached = ErrorCode(code: 486, reason: "Allocation Quota Reached")
    /// 487: both ICE agents claim the same role (RFC 8445 §7.3.1.1).
    public static let roleConflict = ErrorCode(code: 487, reason: "Role Conflict")
    /// 500: a temporary server error (RFC 8489 §14.8).
    public static let serverError = ErrorCode(code: 500, reason: "Server Error")
    /// 508: the server has no capacity for the request now (RFC 8656 §19).
    public static let insufficientCapacity = ErrorCode(code: 508, reason: "Insufficient Capacity")

    /// The codes above, by number.
    public static let known: [ErrorCode] = [
        .tryAlternate, .badRequest, .unauthenticated, .forbidden, .unknownAttribute, .allocationMismatch,
        .staleNonce, .addressFamilyNotSupported, .wrongCredentials, .unsupportedTransportProtocol,
        .peerAddressFamilyMismatch, .connectionAlreadyExists, .connectionTimeoutOrFailure,
        .allocationQuotaReached, .roleConflict, .serverError, .insufficientCapacity,
    ]

    /// The recommended reason phrase for `code`, when it is one of `known`.
    public static func reasonPhrase(for code: Int) -> String? {
        known.first { $0.code == code }?.reason
    }
}

/// The class/number/reason part shared by ERROR-CODE (RFC 8489 §14.8) and ADDRESS-ERROR-CODE
/// (RFC 8656 §18.12); bytes 0–1 differ between the two and are left to the caller.
enum ErrorCodeCoding {
    static func decode(_ value: UnsafeRawBufferPointer, type: AttributeType) throws(StunDecodeError) -> (Int, String) {
        guard value.count >= 4, value.count <= 4 + ErrorCode.maxReasonBytes else { throw .badAttributeLength(type) }
        let errorClass = Int(value[2] & 0x07)
        let number = Int(value[3])
        guard (3...6).contains(errorClass), number <= 99 else { throw .badAttributeValue(type) }
        let reason = try ValueCoding.decodeText(
            UnsafeRawBufferPointer(rebasing: value[4...]), type: type, maxBytes: ErrorCode.maxReasonBytes)
        return (errorClass * 100 + number, reason)
    }

    static func encode(code: Int, reason: String, into value: UnsafeMutableRawBufferPointer) {
        value[2] = UInt8(truncatingIfNeeded: code / 100) & 0x07
        value[3] = UInt8(truncatingIfNeeded: code % 100)
        ValueCoding.encodeText(reason, into: UnsafeMutableRawBufferPointer(rebasing: value[4...]))
    }
}
