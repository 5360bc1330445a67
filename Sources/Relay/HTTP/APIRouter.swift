import RelayCore
import Logging
import StunCodec

/// Answers every request of the HTTP listeners: the credential service, `/metrics`, `/healthz`,
/// `/readyz`, the admin API and the status page (docs/admin.md). Plain code without sockets: the evhttp glue hands it an `HTTPRequest` and
/// writes back the `HTTPResponse`, and tests call it directly. Lives on the thread that runs
/// the HTTP listeners (the main thread), so its rate limiter and counters need no lock.
public final class APIRouter {
    /// Which listener a request came in on: the API one serves everything, the `prometheus`
    /// one (coturn's metrics port) only `/metrics` and the health checks.
    public enum Listener: Sendable {
        case api
        case prometheus
    }

    public static let credentialsPath = "/api/v1/credentials"
    /// Header sections above this get 431 (RFC 6585 §5); evhttp itself refuses far larger ones.
    public static let maxHeaderBytes = 8192
    /// Bodies above this get 413 from evhttp (a credential request is well under 200 bytes).
    public static let maxBodyBytes = 8192

    /// Replaced on reload (new secrets, TTLs, URIs, API keys); the router lives on one thread.
    var credentials: CredentialService
    /// Each tenant's credential service, by name: what its keys mint (docs/tenants.md).
    var tenantCredentials: [String: CredentialService] = [:]
    var keyring: APIKeyring
    var limiter: RateLimiter<String>
    let registry: MetricsRegistry
    let health: ServiceHealth
    var logger: Logger
    public internal(set) var service: ServiceMetrics
    /// The cluster agent's state, in a cluster (docs/cluster.md).
    var cluster: (() -> ClusterSnapshot)?
    /// The process and listener metrics (`ServerMetrics`), read at scrape time.
    var server: (() -> ServerMetrics)?
    /// Usage per tenant, user and hour (docs/usage.md), for `GET /api/v1/usage`.
    var usage: UsageBook?
    /// The running server's allocations and blocklist, for the admin API (docs/admin.md).
    public weak var admin: (any AdminControl)?
    /// Relayed totals sampled once a second, for the status page's rates.
    public internal(set) var trafficHistory = TrafficHistory()
    /// The status page's logged-in browsers.
    var statusSessions = StatusSessions()
    /// The API listener speaks HTTPS: the status cookie gets `Secure`.
    var secureCookies = false

    public init(
        credentials: CredentialService, keyring: APIKeyring, registry: MetricsRegistry, health: ServiceHealth,
        logger: Logger, limiter: RateLimiter<String> = RateLimiter()
    ) {
        self.credentials = credentials
        self.keyring = keyring
        self.limiter = limiter
        self.registry = registry
        self.health = health
        self.logger = logger
        service = ServiceMetrics(loopThreads: registry.slots.count)
    }

    /// The answer to `request`; `now` is unix time (credential expiry), `monotonic` seconds
    /// from a steady clock (rate limiting).
    public func handle(_ request: HTTPRequest, on listener: Listener, now: Int64, monotonic: Double) -> HTTPResponse {
        if request.headerBytes > Self.maxHeaderBytes {
            return .error(
                431, "request_header_fields_too_large", "the request headers exceed \(Self.maxHeaderBytes) bytes")
        }
        switch request.path {
        case Self.credentialsPath where listener == .api:
            guard request.method == .get || request.method == .post else {
                return methodNotAllowed(allow: "GET, POST")
            }
            return issueCredentials(request, now: now, monotonic: monotonic)
        case "/metrics":
            guard request.method == .get || request.method == .head else { return methodNotAllowed(allow: "GET, HEAD") }
            return .text(200, metricsText(), contentType: PrometheusText.contentType)
        case "/healthz":
            guard request.method == .get || request.method == .head else { return methodNotAllowed(allow: "GET, HEAD") }
            return .text(200, "ok\n")
        case "/readyz":
            guard request.method == .get || request.method == .head else { return methodNotAllowed(allow: "GET, HEAD") }
            return health.isReady ? .text(200, "ready\n") : .text(503, "not ready\n")
        case "/status" where listener == .api, "/status/login" where listener == .api,
            "/status/logout" where listener == .api:
            return handleStatus(request, now: now, monotonic: monotonic)
        default:
            if listener == .api, let response = handleAdmin(request, now: now, monotonic: monotonic) {
                return response
            }
            return .error(404, "not_found", "no such resource")
        }
    }

    /// Called once a second on the main thread: the relayed totals, for the status page's rates.
    public func sampleTraffic(monotonic: Double) {
        let c = registry.total().counters
        trafficHistory.record(
            TrafficCounters(
                packetsToPeer: c.packetsToPeer, bytesToPeer: c.bytesToPeer, packetsToClient: c.packetsToClient,
                bytesToClient: c.bytesToClient), at: monotonic)
    }

    /// The Prometheus page: every loop thread's latest snapshot summed, plus this service's counters.
    public func metricsText() -> String {
        RelaydMetrics.render(registry.total(), service: service, carried: registry.carried) + (server?().prometheus() ?? "")
            + (cluster?().prometheus() ?? "")
    }

    /// Whether a request is within `api-rate-limit`: counted per API key (`key`, its name), or per
    /// client IP when no valid token came, so tokens cannot be guessed at speed.
    func withinRateLimit(key: String?, clientIP: String, monotonic: Double) -> Bool {
        limiter.rate == 0 || limiter.allow(key.map { "key:\($0)" } ?? "ip:\(clientIP)", now: monotonic)
    }

    func methodNotAllowed(allow: String) -> HTTPResponse {
        .error(405, "method_not_allowed", "allowed methods: \(allow)", headers: [.init("Allow", allow)])
    }

    /// Rate-limit per API key, or per client IP when no valid token came (429, so tokens cannot
    /// be guessed at speed), refuse callers without a valid token (401), check the service is
    /// configured (503), validate (400), mint (200).
    func issueCredentials(_ request: HTTPRequest, now: Int64, monotonic: Double) -> HTTPResponse {
        let key = keyring.key(authorization: request.header("Authorization"))
        let keyName = key?.name
        guard withinRateLimit(key: keyName, clientIP: request.clientIP, monotonic: monotonic) else {
            service.count(.rateLimited)
            logger.debug(
                "credential request rate-limited",
                metadata: [
                    "event": "credentials_rate_limited", "client": "\(request.clientIP)", "key": "\(keyName ?? "-")",
                ])
            return .error(
                429, "rate_limited", "too many requests; retry later", headers: [.init("Retry-After", "1")])
        }
        guard let keyName else {
            service.count(.unauthorized)
            logger.warning(
                "credential request without a valid API key",
                metadata: ["event": "credentials_unauthorized", "client": "\(request.clientIP)"])
            return .error(
                401, "unauthorized", "an 'Authorization: Bearer <token>' header with a configured api-key is required",
                headers: [.init("WWW-Authenticate", "Bearer realm=\"relayd\"")])
        }
        // A tenant's key mints its tenant's credentials, under its secret (docs/tenants.md).
        let credentials = key?.tenant.map { tenantCredentials[$0] ?? CredentialService.unavailable } ?? self.credentials
        guard credentials.isAvailable else {
            service.count(.unavailable)
            return .error(
                503, "credentials_unavailable", "the credential service needs use-auth-secret and a static-auth-secret")
        }
        let parsed: CredentialRequest
        do {
            parsed =
                request.method == .post
                ? try CredentialRequest.fromJSON(request.body, separator: credentials.separator)
                : try CredentialRequest.fromQuery(request.query, separator: credentials.separator)
        } catch {
            service.count(.badRequest)
            logger.info(
                "credential request refused",
                metadata: [
                    "event": "credentials_bad_request", "client": "\(request.clientIP)", "key": "\(keyName)",
                    "reason": "\(error.message)",
                ])
            return .error(400, "invalid_request", error.message)
        }
        guard let issued = credentials.issue(parsed, now: now, fleet: cluster?().fleet) else {
            service.count(.unavailable)
            return .error(503, "credentials_unavailable", "the credential service is not configured")
        }
        service.count(.issued)
        logger.info(
            "credentials issued",
            metadata: [
                "event": "credentials_issued", "client": "\(request.clientIP)", "key": "\(keyName)",
                "user": "\(LogSafe.text(parsed.user))", "ttl": "\(issued.ttl)", "format": "\(parsed.format.rawValue)",
            ])
        return .json(200, issued.json(parsed.format))
    }
}
