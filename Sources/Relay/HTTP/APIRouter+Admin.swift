import Foundation
import Logging
import RelayCore

/// The admin API (docs/admin.md): live allocations across every loop thread, ending them, and
/// blocking users. Every endpoint needs a key with the admin scope (`api-key=name:token:admin`).
extension APIRouter {
    public static let allocationsPath = "/api/v1/allocations"
    public static let blocksPath = "/api/v1/blocks"
    /// `POST`: a live upgrade (docs/live-upgrade.md).
    public static let upgradePath = "/api/v1/upgrade"
    static let usersPrefix = "/api/v1/users/"
    /// Allocations per page of `GET /api/v1/allocations`, by default and at most.
    public static let defaultPageSize = 100
    public static let maxPageSize = 1000
    /// The longest block: a year.
    public static let maxBlockSeconds = 366 * 86400

    /// The answer for an admin path, or nil when `request` names none.
    func handleAdmin(_ request: HTTPRequest, now: Int64, monotonic: Double) -> HTTPResponse? {
        guard let response = routeAdmin(request, now: now, monotonic: monotonic) else { return nil }
        service.countAdmin(status: response.status)
        return response
    }

    private func routeAdmin(_ request: HTTPRequest, now: Int64, monotonic: Double) -> HTTPResponse? {
        let path = request.path
        if path == Self.allocationsPath {
            return authorizedAdmin(request, monotonic: monotonic, allow: [.get, .delete]) { key, admin in
                request.method == .get
                    ? listAllocations(request, key: key, admin: admin) : terminateByUser(request, key: key, admin: admin)
            }
        }
        if path.hasPrefix(Self.allocationsPath + "/") {
            let session = String(path.dropFirst(Self.allocationsPath.count + 1))
            return authorizedAdmin(request, monotonic: monotonic, allow: [.get, .delete]) { key, admin in
                oneAllocation(session, request: request, key: key, admin: admin)
            }
        }
        if path == Self.upgradePath {
            return authorizedAdmin(request, monotonic: monotonic, allow: [.post]) { key, admin in
                guard key.tenant == nil else { return Self.tenantForbidden(key) }
                switch admin.upgrade(trigger: "api:\(key.name)") {
                case .succeeded(let pid, let allocations):
                    return .json(200, "{\"result\":\"succeeded\",\"pid\":\(pid),\"allocations\":\(allocations)}")
                case .failed(let reason):
                    return .error(409, "upgrade_failed", reason)
                }
            }
        }
        if path == Self.usagePath {
            return authorizedAdmin(request, monotonic: monotonic, allow: [.get]) { key, _ in
                usageAnswer(request, key: key, now: now)
            }
        }
        if path == Self.blocksPath {
            return authorizedAdmin(request, monotonic: monotonic, allow: [.get]) { key, admin in
                let blocks = admin.blocklist.list(now: now).compactMap { entry in
                    Self.tenantView(entry.user, for: key).map {
                        UserBlocklist.Entry(user: $0, until: entry.until, setBy: entry.setBy, setAt: entry.setAt)
                    }
                }
                return .json(200, Self.blocksJSON(blocks))
            }
        }
        if path.hasPrefix(Self.usersPrefix), path.hasSuffix("/block") {
            let encoded = path.dropFirst(Self.usersPrefix.count).dropLast("/block".count)
            return authorizedAdmin(request, monotonic: monotonic, allow: [.get, .post, .delete]) { key, admin in
                guard let user = QueryString.decode(encoded, plusIsSpace: false), Self.isValidUser(user) else {
                    return .error(400, "invalid_user", "the user must be 1 to 256 bytes of UTF-8 without control characters")
                }
                return block(Self.quotaUser(user, for: key), request: request, key: key.name, admin: admin, now: now)
            }
        }
        return nil
    }

    /// Rate limit, then 401 without a valid key, 403 for a credentials-only key, 405 for another
    /// method, 503 when the server cannot be asked; else `body`'s answer.
    private func authorizedAdmin(
        _ request: HTTPRequest, monotonic: Double, allow: [HTTPRequest.Method],
        _ body: (_ key: APIKeyring.Match, _ admin: any AdminControl) -> HTTPResponse
    ) -> HTTPResponse {
        let key = keyring.key(authorization: request.header("Authorization"))
        guard withinRateLimit(key: key?.name, clientIP: request.clientIP, monotonic: monotonic) else {
            return .error(429, "rate_limited", "too many requests; retry later", headers: [.init("Retry-After", "1")])
        }
        guard let key else {
            logger.warning(
                "admin request without a valid API key",
                metadata: [
                    "event": "admin_unauthorized", "client": "\(request.clientIP)", "path": "\(LogSafe.text(request.path))",
                ])
            return .error(
                401, "unauthorized", "an 'Authorization: Bearer <token>' header with an admin api-key is required",
                headers: [.init("WWW-Authenticate", "Bearer realm=\"relayd\"")])
        }
        guard key.scope == .admin else {
            return .error(403, "forbidden", "api-key '\(key.name)' has no admin scope (api-key=name:token:admin)")
        }
        guard allow.contains(request.method) else {
            return methodNotAllowed(allow: allow.map(\.rawValue).joined(separator: ", "))
        }
        guard let admin else { return .error(503, "admin_unavailable", "the server is not running its loops") }
        return body(key, admin)
    }

    /// A tenant's key asking for what only the operator may do: 403.
    static func tenantForbidden(_ key: APIKeyring.Match) -> HTTPResponse {
        .error(403, "forbidden", "api-key '\(key.name)' is tenant '\(key.tenant ?? "")''s; this is the operator's")
    }

    /// The user a key's caller means by `user`: for a tenant's key, its tenant's user of that
    /// name (`<tenant>/<user>`, docs/tenants.md); for the operator's, `user` as given.
    static func quotaUser(_ user: String, for key: APIKeyring.Match) -> String {
        key.tenant.map { $0 + "/" + user } ?? user
    }

    /// A quota user as a key's caller sees it: without the `<tenant>/` prefix for a tenant's key,
    /// nil when it is another tenant's.
    static func tenantView(_ user: String, for key: APIKeyring.Match) -> String? {
        guard let tenant = key.tenant else { return user }
        let prefix = tenant + "/"
        return user.hasPrefix(prefix) ? String(user.dropFirst(prefix.count)) : nil
    }

    /// `record` as a key's caller sees it: its user without the tenant prefix for a tenant's key.
    static func tenantView(_ record: AllocationRecord, for key: APIKeyring.Match) -> AllocationRecord {
        var seen = record
        if let user = tenantView(record.user, for: key) { seen.user = user }
        return seen
    }

    /// `GET /api/v1/allocations?user=U&limit=N&cursor=C`: ordered by session id; `next_cursor`
    /// names where the next page starts.
    private func listAllocations(_ request: HTTPRequest, key: APIKeyring.Match, admin: any AdminControl) -> HTTPResponse {
        guard let query = QueryString.parse(request.query ?? "") else {
            return .error(400, "invalid_request", "the query string is malformed")
        }
        var selector = AllocationSelector.all
        var limit = Self.defaultPageSize
        var cursor: String? = nil
        for (name, value) in query {
            switch name {
            case "user": selector = .user(Self.quotaUser(value, for: key))
            case "limit":
                guard let n = Int(value), (1...Self.maxPageSize).contains(n) else {
                    return .error(400, "invalid_request", "limit must be an integer from 1 to \(Self.maxPageSize)")
                }
                limit = n
            case "cursor": cursor = value
            default: return .error(400, "invalid_request", "unknown parameter '\(name)'; expected user, limit, cursor")
            }
        }
        guard let page = admin.allocations(selector, tenant: key.tenant, after: cursor, limit: limit) else {
            return loopsDidNotAnswer()
        }
        let next = page.more ? page.records.last?.session : nil
        return .json(200, Self.allocationsJSON(page.records.map { Self.tenantView($0, for: key) }, total: page.total, next: next))
    }

    /// `DELETE /api/v1/allocations?user=U`: ends every allocation of U.
    private func terminateByUser(_ request: HTTPRequest, key: APIKeyring.Match, admin: any AdminControl) -> HTTPResponse {
        guard let query = QueryString.parse(request.query ?? ""), query.count == 1, query[0].name == "user",
            Self.isValidUser(query[0].value)
        else {
            return .error(
                400, "invalid_request",
                "DELETE \(Self.allocationsPath) needs ?user=U (one session: DELETE \(Self.allocationsPath)/{session})")
        }
        let user = Self.quotaUser(query[0].value, for: key)
        guard let count = admin.terminate(.user(user), tenant: key.tenant) else { return loopsDidNotAnswer() }
        logger.notice(
            "allocations terminated",
            metadata: [
                "event": "admin_terminate", "key": "\(key.name)", "user": "\(LogSafe.text(user))", "count": "\(count)",
            ])
        return .json(200, Self.terminatedJSON(count))
    }

    /// `GET` or `DELETE /api/v1/allocations/{session}`.
    private func oneAllocation(_ session: String, request: HTTPRequest, key: APIKeyring.Match, admin: any AdminControl)
        -> HTTPResponse
    {
        guard session.utf8.count == 16, session.utf8.allSatisfy({ Self.isLowerHex($0) }) else {
            return .error(404, "not_found", "no allocation with session id '\(LogSafe.text(session))'")
        }
        if request.method == .get {
            guard let page = admin.allocations(.session(session), tenant: key.tenant, after: nil, limit: 1) else {
                return loopsDidNotAnswer()
            }
            guard let record = page.records.first else {
                return .error(404, "not_found", "no allocation with session id '\(session)'")
            }
            var w = JSONWriter()
            Self.write(Self.tenantView(record, for: key), to: &w)
            return .json(200, w.text)
        }
        guard let count = admin.terminate(.session(session), tenant: key.tenant) else { return loopsDidNotAnswer() }
        guard count > 0 else { return .error(404, "not_found", "no allocation with session id '\(session)'") }
        logger.notice(
            "allocation terminated",
            metadata: ["event": "admin_terminate", "key": "\(key.name)", "session": "\(session)", "count": "\(count)"])
        return .json(200, Self.terminatedJSON(count))
    }

    /// `POST /api/v1/users/{user}/block` (`{"seconds": N}` or `?seconds=N`), `DELETE` to lift it,
    /// `GET` to read it.
    private func block(_ user: String, request: HTTPRequest, key: String, admin: any AdminControl, now: Int64)
        -> HTTPResponse
    {
        switch request.method {
        case .get:
            guard let entry = admin.blocklist.list(now: now).first(where: { $0.user == user }) else {
                return .error(404, "not_found", "user '\(user)' is not blocked")
            }
            return .json(200, Self.blockJSON(entry))
        case .delete:
            guard admin.liftBlock(user, by: key) else { return .error(404, "not_found", "user '\(user)' is not blocked") }
            logger.notice(
                "user unblocked", metadata: ["event": "admin_unblock", "key": "\(key)", "user": "\(LogSafe.text(user))"])
            return .json(200, "{\"user\":\(JSONWriter.quoted(user)),\"blocked\":false}")
        default:
            guard let seconds = Self.blockSeconds(request) else {
                return .error(
                    400, "invalid_request",
                    "give the block's length as {\"seconds\": N} or ?seconds=N, N from 1 to \(Self.maxBlockSeconds)")
            }
            let entry = UserBlocklist.Entry(user: user, until: now + Int64(seconds), setBy: key, setAt: now)
            guard admin.setBlock(entry) else {
                return .error(503, "blocklist_full", "\(UserBlocklist.limit) users are blocked already")
            }
            logger.notice(
                "user blocked",
                metadata: [
                    "event": "admin_block", "key": "\(key)", "user": "\(LogSafe.text(user))", "seconds": "\(seconds)",
                ])
            return .json(200, Self.blockJSON(entry))
        }
    }

    private func loopsDidNotAnswer() -> HTTPResponse {
        .error(503, "loops_unavailable", "a relay loop thread did not answer in time; try again")
    }

    static func blockSeconds(_ request: HTTPRequest) -> Int? {
        struct Body: Decodable { var seconds: Int }
        var seconds: Int? = nil
        if let query = request.query, let pairs = QueryString.parse(query),
            let value = pairs.first(where: { $0.name == "seconds" })?.value
        {
            seconds = Int(value)
        } else if !request.body.isEmpty {
            seconds = try? JSONDecoder().decode(Body.self, from: Data(request.body)).seconds
        }
        guard let seconds, (1...maxBlockSeconds).contains(seconds) else { return nil }
        return seconds
    }

    static func isValidUser(_ user: String) -> Bool {
        (1...256).contains(user.utf8.count) && !user.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    static func isLowerHex(_ b: UInt8) -> Bool { (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x66) }
}
