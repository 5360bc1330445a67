/// Counters of the HTTP service itself, kept on the thread that runs it.
public struct ServiceMetrics: Sendable {
    /// How a credential request ended.
    public enum CredentialResult: Int, CaseIterable, Sendable {
        case issued
        case unauthorized
        case badRequest
        case rateLimited
        case unavailable

        public var label: String {
            switch self {
            case .issued: return "issued"
            case .unauthorized: return "unauthorized"
            case .badRequest: return "bad_request"
            case .rateLimited: return "rate_limited"
            case .unavailable: return "unavailable"
            }
        }
    }

    public var credentialRequests = [UInt64](repeating: 0, count: CredentialResult.allCases.count)
    /// Admin API requests (docs/admin.md) by the HTTP status they got.
    public var adminRequests: [Int: UInt64] = [:]
    /// Loop threads serving STUN/TURN.
    public var loopThreads = 1

    public init(loopThreads: Int = 1) { self.loopThreads = loopThreads }

    public mutating func count(_ result: CredentialResult) { credentialRequests[result.rawValue] &+= 1 }

    public func credentials(_ result: CredentialResult) -> UInt64 { credentialRequests[result.rawValue] }

    public mutating func countAdmin(status: Int) { adminRequests[status, default: 0] &+= 1 }
}
