import RelayCore
import Foundation

/// A caller's request for TURN credentials, validated: from the query of
/// `GET /api/v1/credentials?user=<id>&ttl=<s>&format=<f>` or the JSON body of the POST.
public struct CredentialRequest: Sendable, Equatable {
    /// The response shape (docs/compatibility.md, "Credential service responses").
    public enum Format: String, CaseIterable, Sendable {
        /// draft-uberti-behave-turn-rest-00 §2.2: `username`, `password`, `ttl`, `uris`.
        case rest
        /// `RTCConfiguration.iceServers` of browsers and libwebrtc: `urls`, `username`, `credential`.
        case iceServers = "ice-servers"
        /// The iOS WebRTC SDK's `RTCIceServer(urlStrings:username:credential:)`.
        case webrtcKit = "webrtckit"
    }

    /// Why a request is answered 400; `message` is safe to show the caller.
    public enum Invalid: Error, Equatable, Sendable {
        case malformedQuery
        case malformedBody
        case repeatedParameter(String)
        case missingUser
        case userTooLong
        case userContainsSeparator
        case userContainsControlCharacter
        /// A code point the STUN USERNAME may not hold (RFC 8489 §14.3, OpaqueString).
        case userNotOpaqueString
        case invalidTTL
        case unknownFormat
        case invalidNodes

        public var message: String {
            switch self {
            case .malformedQuery: return "the query string is not valid percent-encoded UTF-8"
            case .malformedBody:
                return
                    "the body must be a JSON object with \"user\" (string), \"ttl\" (integer) and \"format\" (string)"
            case .repeatedParameter(let name): return "parameter '\(name)' is given more than once"
            case .missingUser: return "'user' is required and must not be empty"
            case .userTooLong: return "'user' is longer than \(CredentialRequest.maxUserLength) characters"
            case .userContainsSeparator: return "'user' must not contain the rest-api-separator"
            case .userContainsControlCharacter: return "'user' must not contain control characters"
            case .userNotOpaqueString:
                return "'user' must not contain invisible, unassigned or noncharacter code points"
            case .invalidTTL: return "'ttl' must be a positive integer number of seconds"
            case .invalidNodes: return "'nodes' must be an integer 1-\(CredentialRequest.maxNodes)"
            case .unknownFormat:
                return "'format' must be one of: \(Format.allCases.map(\.rawValue).joined(separator: ", "))"
            }
        }
    }

    public static let maxUserLength = 64
    /// At most four UTF-8 bytes a character on average: with the expiry and separator, far
    /// below the 508 bytes a USERNAME may have.
    public static let maxUserBytes = 4 * maxUserLength

    public var user: String
    /// Requested lifetime in seconds; nil means `credential-ttl`. Capped later at `credential-max-ttl`.
    public var ttl: Int?
    public var format: Format
    /// In a cluster, how many nodes' URIs to return (docs/cluster.md); nil means 2.
    public var nodes: Int?
    /// In a cluster, node labels to prefer (`region=eu-west`): every other query parameter.
    public var labels: [NodeLabel]

    public static let maxNodes = 16
    public static let defaultNodes = 2

    public init(user: String, ttl: Int? = nil, format: Format = .rest, nodes: Int? = nil, labels: [NodeLabel] = []) {
        self.user = user
        self.ttl = ttl
        self.format = format
        self.nodes = nodes
        self.labels = labels
    }

    /// From a GET query; repeated known parameters are refused, other ones are labels to prefer.
    public static func fromQuery(_ query: String?, separator: String) throws(Invalid) -> CredentialRequest {
        guard let pairs = QueryString.parse(query ?? "") else { throw .malformedQuery }
        var values: [String: String] = [:]
        var labels: [NodeLabel] = []
        for (name, value) in pairs {
            if ["user", "ttl", "format", "nodes"].contains(name) {
                guard values.updateValue(value, forKey: name) == nil else { throw .repeatedParameter(name) }
            } else if NodeLabel.isToken(name), NodeLabel.isToken(value), !labels.contains(where: { $0.key == name }) {
                // Any other parameter is a label to prefer; ones no node carries change nothing.
                labels.append(NodeLabel(key: name, value: value))
            }
        }
        var request = try validated(
            user: values["user"], ttl: values["ttl"], format: values["format"], separator: separator)
        request.nodes = try parseNodes(values["nodes"])
        request.labels = labels
        return request
    }

    /// `nodes`: 1...`maxNodes`.
    static func parseNodes(_ text: String?) throws(Invalid) -> Int? {
        guard let text else { return nil }
        guard let n = Int(text), (1...maxNodes).contains(n) else { throw .invalidNodes }
        return n
    }

    /// From a POST body `{"user": …, "ttl": …, "format": …, "nodes": …, "labels": {…}}` (`ttl` a
    /// JSON integer or a string of digits).
    public static func fromJSON(_ body: [UInt8], separator: String) throws(Invalid) -> CredentialRequest {
        let decoded: Body
        do {
            decoded = try JSONDecoder().decode(Body.self, from: Data(body))
        } catch {
            throw .malformedBody
        }
        let ttl: String?
        switch decoded.ttl {
        case nil: ttl = nil
        case .number(let n): ttl = n > 0 ? String(n) : "0"
        case .text(let s): ttl = s
        }
        var request = try validated(user: decoded.user, ttl: ttl, format: decoded.format, separator: separator)
        request.nodes = try parseNodes(decoded.nodes.map { String($0) })
        request.labels = (decoded.labels ?? [:]).sorted { $0.key < $1.key }.compactMap { key, value in
            NodeLabel.isToken(key) && NodeLabel.isToken(value) ? NodeLabel(key: key, value: value) : nil
        }
        return request
    }

    /// The checks both forms share: a user id of 1...64 characters without the separator or
    /// control characters (it becomes part of the STUN USERNAME), a positive integer ttl, a known format.
    public static func validated(user: String?, ttl: String?, format: String?, separator: String) throws(Invalid)
        -> CredentialRequest
    {
        guard let user, !user.isEmpty else { throw .missingUser }
        // Characters, and bytes too: one character may be many code points (combining marks),
        // and the USERNAME it becomes must stay under 509 bytes (RFC 8489 §14.3).
        guard user.count <= maxUserLength, user.utf8.count <= maxUserBytes else { throw .userTooLong }
        guard !user.unicodeScalars.contains(where: isControl) else { throw .userContainsControlCharacter }
        guard UsernameCheck.firstDisallowed(in: user) == nil else { throw .userNotOpaqueString }
        guard separator.isEmpty || !user.contains(separator) else { throw .userContainsSeparator }
        var seconds: Int? = nil
        if let ttl {
            guard let parsed = parseTTL(ttl) else { throw .invalidTTL }
            seconds = parsed
        }
        var shape = Format.rest
        if let format {
            guard let known = Format(rawValue: format) else { throw .unknownFormat }
            shape = known
        }
        return CredentialRequest(user: user, ttl: seconds, format: shape)
    }

    /// Decimal digits only, value above zero; values beyond `Int` saturate (the cap applies later).
    static func parseTTL(_ text: String) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        var value = 0
        for digit in text.utf8 {
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = times10.addingReportingOverflow(Int(digit - 0x30))
            if o1 || o2 { return Int.max }
            value = next
        }
        return value > 0 ? value : nil
    }

    /// C0 and C1 control characters and DEL.
    static func isControl(_ s: Unicode.Scalar) -> Bool {
        s.value < 0x20 || (s.value >= 0x7F && s.value < 0xA0)
    }

    private struct Body: Decodable {
        var user: String?
        var ttl: TTL?
        var format: String?
        var nodes: Int?
        var labels: [String: String]?
    }

    private enum TTL: Decodable {
        case number(Int)
        case text(String)

        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let n = try? c.decode(Int.self) {
                self = .number(n)
            } else {
                self = .text(try c.decode(String.self))
            }
        }
    }
}
