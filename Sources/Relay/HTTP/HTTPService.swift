import RelayCore
import Glibc
import Logging
import StunCodec

/// The daemon's HTTP side, on the main thread's event loop: the API listener
/// (`api-listening-ip`:`api-listening-port`: credentials, `/metrics`, `/healthz`, `/readyz`, the
/// admin API and `/status`, docs/admin.md)
/// and, with coturn's `prometheus` key, a metrics listener on `prometheus-address`:`prometheus-port`.
final class HTTPService {
    let router: APIRouter
    private(set) var configuration: RelayConfiguration
    private var listeners: [HTTPListener] = []
    /// The API listener's TLS context while it serves HTTPS; kept alive here (sessions hold
    /// their own reference to it in OpenSSL).
    private(set) var apiTLS: TLSContext?
    private let base: OpaquePointer
    private let interfaceAddresses: [IPAddress]

    init(
        base: OpaquePointer, configuration: RelayConfiguration, interfaceAddresses: [IPAddress],
        registry: MetricsRegistry, health: ServiceHealth, logger: Logger
    ) {
        self.base = base
        self.configuration = configuration
        self.interfaceAddresses = interfaceAddresses
        router = APIRouter(
            credentials: CredentialService(configuration: configuration, interfaceAddresses: interfaceAddresses),
            keyring: APIKeyring(keys: configuration.allAPIKeys), registry: registry, health: health, logger: logger,
            limiter: Self.limiter(configuration))
        router.tenantCredentials = configuration.tenantCredentialServices(interfaceAddresses: interfaceAddresses)
    }

    /// `api-rate-limit` per key (or client IP), bursts of twice that; 0: none.
    static func limiter(_ c: RelayConfiguration) -> RateLimiter<String> {
        RateLimiter(rate: Double(c.apiRateLimit), burst: Double(2 * c.apiRateLimit))
    }

    /// A reloaded configuration: new secrets, credential TTLs, URIs and API keys apply to the next
    /// request, the API's certificate to the next connection. The listeners stay where they are
    /// (their keys are restart-only). Returns what could not be applied.
    @discardableResult
    func update(configuration c: RelayConfiguration) -> String? {
        defer { configuration = c }
        let problem = reloadAPITLS(c)
        router.credentials = CredentialService(configuration: c, interfaceAddresses: interfaceAddresses)
        router.tenantCredentials = c.tenantCredentialServices(interfaceAddresses: interfaceAddresses)
        router.keyring = APIKeyring(keys: c.allAPIKeys)
        if Double(c.apiRateLimit) != router.limiter.rate { router.limiter = Self.limiter(c) }
        router.logger.logLevel = c.logLevel
        return problem
    }

    /// The API listener's address, and the metrics listener's when it is a separate one.
    var addresses: (api: TransportAddress, prometheus: TransportAddress?) {
        let api = TransportAddress(ip: configuration.apiListeningIP, port: configuration.apiListeningPort)
        guard configuration.prometheus else { return (api, nil) }
        let metrics = TransportAddress(
            ip: configuration.prometheusAddress ?? .ipv4Any, port: configuration.prometheusPort)
        return (api, metrics == api ? nil : metrics)
    }

    /// True once the API is asked for (an `api-key`, or an address other than the default
    /// 127.0.0.1:8080): then failing to bind it stops the server. At the defaults it only warns,
    /// so several servers can run side by side on one host.
    var apiRequired: Bool {
        !configuration.apiKeys.isEmpty || configuration.apiListeningPort != RelayConfiguration().apiListeningPort
            || configuration.apiListeningIP != RelayConfiguration().apiListeningIP
    }

    /// Binds the listeners; throws naming the address that could not be bound. Returns what the
    /// operator should be warned about: the default API listener not bound, no `api-key`.
    func start() throws(RelayServer.StartError) -> [String] {
        let (api, prometheus) = addresses
        var warnings: [String] = []
        router.secureCookies = configuration.apiUsesTLS
        if configuration.apiUsesTLS {
            do {
                apiTLS = try TLSContext(configuration: configuration.apiTLSConfiguration)
            } catch {
                throw RelayServer.StartError(description: "HTTPS for the API: \(error.description)")
            }
        }
        if let apiHandoff {
            // The API's port is TURN's: the loops pass its connections on (docs/tls.md).
            guard let listener = HTTPListener(base: base, router: router, kind: .api),
                listener.listen(handoff: apiHandoff)
            else {
                throw RelayServer.StartError(
                    description: "cannot open the API's listener for the TURN port: \(String(cString: strerror(errno)))")
            }
            listeners.append(listener)
        } else if !listen(api, kind: .api) {
            let problem = "cannot bind HTTP API listener \(api): \(String(cString: strerror(errno)))"
            guard !apiRequired else { throw RelayServer.StartError(description: problem) }
            warnings.append("\(problem); /metrics, /healthz and /readyz are not served (set api-listening-port)")
        }
        if configuration.apiKeys.isEmpty && configuration.useAuthSecret {
            warnings.append("no api-key configured: \(APIRouter.credentialsPath) answers 401 to every request")
        }
        if let prometheus, !listen(prometheus, kind: .prometheus) {
            throw RelayServer.StartError(
                description: "cannot bind Prometheus listener \(prometheus): \(String(cString: strerror(errno)))")
        }
        return warnings
    }

    private func listen(_ address: TransportAddress, kind: APIRouter.Listener) -> Bool {
        let inherited = inheritance?.listener(.httpListener, address: address)
        guard let listener = HTTPListener(base: base, router: router, kind: kind),
            listener.bind(address, inherited: inherited)
        else {
            if let inherited { Glibc.close(inherited) }
            return false
        }
        if kind == .api, let apiTLS { listener.useTLS(apiTLS) }
        listeners.append(listener)
        return true
    }

    /// The API's certificate and key read again (SIGHUP): new connections get them; a file
    /// that does not load leaves the running ones in place, and says why.
    private func reloadAPITLS(_ c: RelayConfiguration) -> String? {
        guard apiTLS != nil, c.apiUsesTLS else { return nil }
        do {
            let next = try TLSContext(configuration: c.apiTLSConfiguration)
            apiTLS = next
            // The loops' listener (the API on TURN's port) gets plaintext: the loop holds the TLS.
            for listener in listeners where listener.kind == .api && listener.handoff == nil { listener.useTLS(next) }
            return nil
        } catch {
            return "HTTPS for the API: \(error.description); the previous certificate stays"
        }
    }

    /// Closes the listeners and their connections (before the event base is freed).
    func close() { listeners.removeAll() }

    /// Listening sockets a live upgrade handed over (docs/live-upgrade.md), used by `start`.
    var inheritance: Inheritance?
    /// Set when the API shares a TURN port (docs/tls.md, "The API on the same port").
    var apiHandoff: APIHandoff?

    /// Every listening socket, for a live upgrade's heir.
    var listeningSockets: [(address: TransportAddress, fd: Int32)] { listeners.flatMap(\.listeningSockets) }

    /// The heir accepts now; connections already open are served on.
    func closeListeningSockets() { for listener in listeners { listener.closeListeningSockets() } }
}
