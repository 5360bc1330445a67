import Foundation
import Logging
import RelayCore

/// The status page (docs/admin.md): `GET /status` for an admin token (`Authorization: Bearer`)
/// or a session cookie from the login form (`POST /status/login`); `POST /status/logout` ends it and shows the form again.
extension APIRouter {
    func handleStatus(_ request: HTTPRequest, now: Int64, monotonic: Double) -> HTTPResponse {
        // A form posted from another site (cross-site request forgery): browsers say so in
        // Sec-Fetch-Site (Fetch Metadata); the SameSite=Strict cookie already keeps it powerless.
        if request.method == .post, request.header("Sec-Fetch-Site")?.lowercased() == "cross-site" {
            return html(403, StatusPage.login(message: "Cross-site form submissions are refused."))
        }
        switch (request.path, request.method) {
        case ("/status", .get), ("/status", .head):
            return statusPage(request, now: now, monotonic: monotonic)
        case ("/status/login", .post):
            return login(request, monotonic: monotonic)
        case ("/status/logout", .post):
            if let id = StatusSessions.id(in: request) { statusSessions.close(id) }
            var out = html(200, StatusPage.login(message: "Logged out."))
            out.headers.append(
                .init("Set-Cookie", "\(StatusSessions.cookieName)=; Max-Age=0; Path=/status; HttpOnly; SameSite=Strict"))
            return out
        case ("/status", _):
            return methodNotAllowed(allow: "GET, HEAD")
        default:
            return methodNotAllowed(allow: "POST")
        }
    }

    private func statusPage(_ request: HTTPRequest, now: Int64, monotonic: Double) -> HTTPResponse {
        if let bearer = request.header("Authorization") {
            // Rate-limited as every API request is (429), so tokens cannot be guessed at speed.
            let key = keyring.key(authorization: bearer)
            guard withinRateLimit(key: key?.name, clientIP: request.clientIP, monotonic: monotonic) else {
                return html(429, StatusPage.login(message: "Too many requests; wait a second."))
            }
            guard let key else {
                return unauthorized(StatusPage.login(message: "That token matches no api-key."))
            }
            guard key.scope == .admin, key.tenant == nil else {
                return html(403, StatusPage.login(message: "api-key '\(key.name)' has no admin scope for the whole node."))
            }
        } else {
            guard let id = StatusSessions.id(in: request), let session = statusSessions.session(id, now: monotonic)
            else {
                return unauthorized(StatusPage.login(message: nil))
            }
            guard keyring.scope(digest: session.digest) == .admin else {
                statusSessions.close(id)
                return unauthorized(
                    StatusPage.login(message: "The token you logged in with is no longer an admin api-key."))
            }
        }
        let server = server?()
        let users = admin?.userTraffic()?.sorted { ($0.bytes, $1.user) > ($1.bytes, $0.user) }
        var view = StatusView(
            version: RelaydVersion.string,
            uptimeSeconds: server.map { max(0, Int(Double(now) - $0.process.startTime)) } ?? 0,
            draining: health.isDraining, loopThreads: service.loopThreads, metrics: registry.total(),
            rates: trafficHistory.rates(), topUsers: users,
            openStreamConnections: server?.openStreamConnections ?? 0, credentialsIssued: service.credentials(.issued))
        if let snapshot = cluster?() { view.cluster = (snapshot.nodeName, snapshot.fleet) }
        return html(200, request.method == .head ? "" : StatusPage.render(view))
    }

    /// The login form's POST: `token=<admin token>` (form-encoded), rate-limited per client IP.
    private func login(_ request: HTTPRequest, monotonic: Double) -> HTTPResponse {
        guard withinRateLimit(key: nil, clientIP: request.clientIP, monotonic: monotonic) else {
            return html(429, StatusPage.login(message: "Too many attempts; wait a second."))
        }
        let form = QueryString.parse(String(decoding: request.body, as: UTF8.self)) ?? []
        guard let token = form.first(where: { $0.name == "token" })?.value, let key = keyring.key(token: Substring(token))
        else {
            logger.warning(
                "status page login refused", metadata: ["event": "status_login_refused", "client": "\(request.clientIP)"])
            return unauthorized(StatusPage.login(message: "That token matches no api-key."))
        }
        guard key.scope == .admin, key.tenant == nil else {
            return html(403, StatusPage.login(message: "api-key '\(key.name)' has no admin scope for the whole node."))
        }
        let id = statusSessions.open(for: key.name, digest: APIKeyring.digest(Substring(token)), now: monotonic)
        logger.notice(
            "status page login", metadata: ["event": "status_login", "key": "\(key.name)", "client": "\(request.clientIP)"])
        let maxAge = Int(StatusSessions.lifetime)
        return seeOther(
            "/status",
            cookie: "\(StatusSessions.cookieName)=\(id); Max-Age=\(maxAge); Path=/status; HttpOnly; SameSite=Strict"
                + (secureCookies ? "; Secure" : ""))
    }

    /// 401 with the login form and the challenge RFC 9110 §11.6.1 asks for.
    private func unauthorized(_ body: String) -> HTTPResponse {
        var response = html(401, body)
        response.headers.append(.init("WWW-Authenticate", "Bearer realm=\"relayd\""))
        return response
    }

    private func html(_ status: Int, _ body: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: StatusPage.headers, body: Array(body.utf8))
    }

    private func seeOther(_ location: String, cookie: String) -> HTTPResponse {
        HTTPResponse(
            status: 303, headers: StatusPage.headers + [.init("Location", location), .init("Set-Cookie", cookie)])
    }
}
