/// Why the server refuses a request; each case knows its STUN error code
/// (RFC 8489 §14.8, RFC 8656 §19, RFC 6156 §10.2, RFC 6062 §6.3).
public enum RelayError: Error, Hashable, Sendable {
    case tryAlternate
    case badRequest
    case unauthorized
    case forbidden
    /// RFC 8016 §3.4: mobility was asked for but is turned off, or not offered on this transport.
    case mobilityForbidden
    case unknownAttribute
    case allocationMismatch
    case staleNonce
    case addressFamilyNotSupported
    case wrongCredentials
    case unsupportedTransportProtocol
    case peerAddressFamilyMismatch
    /// RFC 6062 §6.3: a Connect to a peer the allocation is connected or connecting to already.
    case connectionAlreadyExists
    /// RFC 6062 §6.3: the connect to the peer failed or timed out.
    case connectionTimeoutOrFailure
    case allocationQuotaReached
    case serverError
    case insufficientCapacity

    /// The numeric code carried in ERROR-CODE.
    public var code: Int {
        switch self {
        case .tryAlternate: return 300
        case .badRequest: return 400
        case .unauthorized: return 401
        case .forbidden: return 403
        case .mobilityForbidden: return 405
        case .unknownAttribute: return 420
        case .allocationMismatch: return 437
        case .staleNonce: return 438
        case .addressFamilyNotSupported: return 440
        case .wrongCredentials: return 441
        case .unsupportedTransportProtocol: return 442
        case .peerAddressFamilyMismatch: return 443
        case .connectionAlreadyExists: return 446
        case .connectionTimeoutOrFailure: return 447
        case .allocationQuotaReached: return 486
        case .serverError: return 500
        case .insufficientCapacity: return 508
        }
    }

    /// The reason phrase recommended by the RFCs.
    public var reason: String {
        switch self {
        case .tryAlternate: return "Try Alternate"
        case .badRequest: return "Bad Request"
        case .unauthorized: return "Unauthorized"
        case .forbidden: return "Forbidden"
        case .mobilityForbidden: return "Mobility Forbidden"
        case .unknownAttribute: return "Unknown Attribute"
        case .allocationMismatch: return "Allocation Mismatch"
        case .staleNonce: return "Stale Nonce"
        case .addressFamilyNotSupported: return "Address Family not Supported"
        case .wrongCredentials: return "Wrong Credentials"
        case .unsupportedTransportProtocol: return "Unsupported Transport Protocol"
        case .peerAddressFamilyMismatch: return "Peer Address Family Mismatch"
        case .connectionAlreadyExists: return "Connection Already Exists"
        case .connectionTimeoutOrFailure: return "Connection Timeout or Failure"
        case .allocationQuotaReached: return "Allocation Quota Reached"
        case .serverError: return "Server Error"
        case .insufficientCapacity: return "Insufficient Capacity"
        }
    }

    public static let allCases: [RelayError] = [
        .tryAlternate, .badRequest, .unauthorized, .forbidden, .mobilityForbidden, .unknownAttribute, .allocationMismatch,
        .staleNonce, .addressFamilyNotSupported, .wrongCredentials, .unsupportedTransportProtocol,
        .peerAddressFamilyMismatch, .connectionAlreadyExists, .connectionTimeoutOrFailure, .allocationQuotaReached, .serverError, .insufficientCapacity,
    ]
}
