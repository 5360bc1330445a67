import StunCodec

/// The status page's browser sessions (docs/admin.md): a random 256-bit id in an HttpOnly,
/// SameSite=Strict cookie, mapped to the admin key that logged in (its name, and its token's
/// SHA-256) and an expiry. Lives on the main thread with the router. A session whose token was
/// rotated or removed, or lost its admin scope (a reload), ends at its next use.
struct StatusSessions {
    struct Session {
        var key: String
        var digest: [UInt8]
        var expires: Double
    }

    static let cookieName = "relayd_status"
    /// Seconds a login lasts.
    static let lifetime = 12 * 3600.0
    /// Sessions held at most; a new login past it replaces the one closest to expiry.
    static let limit = 1024

    private var sessions: [String: Session] = [:]

    /// A new session for key `key` with token SHA-256 `digest`; returns its id.
    mutating func open(for key: String, digest: [UInt8], now: Double) -> String {
        sessions = sessions.filter { $0.value.expires > now }
        if sessions.count >= Self.limit, let oldest = sessions.min(by: { $0.value.expires < $1.value.expires }) {
            sessions[oldest.key] = nil
        }
        var random = SystemRandomNumberGenerator()
        let id = (0..<4).map { _ in
            let hex = String(random.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
        sessions[id] = Session(key: key, digest: digest, expires: now + Self.lifetime)
        return id
    }

    /// Live session `id`, or nil.
    mutating func session(_ id: String, now: Double) -> Session? {
        guard let session = sessions[id] else { return nil }
        guard session.expires > now else {
            sessions[id] = nil
            return nil
        }
        return session
    }

    mutating func close(_ id: String) { sessions[id] = nil }

    /// The session id the request's `Cookie` header carries (RFC 6265 §4.2), if any.
    static func id(in request: HTTPRequest) -> String? {
        for header in request.headers where header.name.lowercased() == "cookie" {
            for pair in header.value.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == cookieName {
                    return String(parts[1].trimmingCharacters(in: .whitespaces))
                }
            }
        }
        return nil
    }
}
