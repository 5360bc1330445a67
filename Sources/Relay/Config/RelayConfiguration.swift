import RelayCore
import Logging
import StunCodec

/// The server's whole configuration: one immutable value built from `turnserver.conf` and the
/// command line, passed explicitly to whatever needs it. Defaults are coturn's.
public struct RelayConfiguration: Sendable, Equatable {
    // Listeners.
    public var listeningPort: UInt16 = 3478
    public var tlsListeningPort: UInt16 = 5349
    public var altListeningPort: UInt16?
    public var altTLSListeningPort: UInt16?
    /// Addresses to listen on; empty means all (0.0.0.0 and ::).
    public var listeningIPs: [IPAddress] = []
    public var noUDP = false
    public var noTCP = false
    public var noTLS = false

    // Relay.
    public var relayIPs: [IPAddress] = []
    public var externalIPs: [ExternalIP] = []
    public var minPort = CoreSettings.defaults.minPort
    public var maxPort = CoreSettings.defaults.maxPort
    /// Relay threads; nil means one per core.
    public var relayThreads: Int?

    // Authentication.
    public var realm = "relayd"
    /// TURN REST credentials (coturn `use-auth-secret`).
    public var useAuthSecret = false
    /// Every configured secret is tried, so a new one can be added before the old one is dropped.
    public var staticAuthSecrets: [String] = []
    /// Files the secrets of `static-auth-secret`, `api-key`, the Redis URL's password and
    /// `pkey-pwd` are read from (docs/configuration.md, "Secrets in files"), instead of naming
    /// them; read again on SIGHUP.
    public var staticAuthSecretFile: String?
    public var apiKeyFile: String?
    public var clusterRedisPasswordFile: String?
    public var pkeyPasswordFile: String?
    /// The password `cluster-redis-password-file` held, until it replaces the URL's.
    var clusterRedisPassword: String?
    /// Between the expiry timestamp and the user id in a REST username.
    public var restAPISeparator = ":"
    public var ltCredMech = false
    public var users: [StaticUser] = []
    public var noAuth = false
    /// Seconds a nonce stays fresh before a request gets 438 (Stale Nonce).
    public var staleNonce = 600

    // Limits (0 means unlimited for quotas and bandwidth).
    public var userQuota = 0
    public var totalQuota = 0
    public var maxAllocateLifetime = CoreSettings.defaults.maxAllocateLifetime
    public var channelLifetime = CoreSettings.defaults.channelLifetime
    public var permissionLifetime = CoreSettings.defaults.permissionLifetime
    public var maxBPS = CoreSettings.defaults.maxBPS
    public var bpsCapacity = 0

    // Peer policy.
    public var deniedPeerIPs: [IPRange] = []
    /// Sources whose TCP and TLS connections may start with a PROXY protocol v2 header naming
    /// the real client (`proxy-protocol-from`, docs/tls.md "Behind a load balancer"); a header
    /// from any other source closes its connection.
    public var proxyProtocolFrom: [IPRange] = []
    public var allowedPeerIPs: [IPRange] = []
    public var allowLoopbackPeers = false
    public var noMulticastPeers = false

    // TLS.
    public var cert: String?
    public var pkey: String?
    public var pkeyPassword: String?
    public var cipherList: String?
    /// The key exchange groups TLS and DTLS accept (coturn's `ec-curve-name`): one name OpenSSL
    /// knows (`prime256v1`, `secp384r1`, `X25519`, …) or a colon-separated list, in order of
    /// preference; nil leaves OpenSSL's defaults. A client whose key share is of another group
    /// gets a HelloRetryRequest (RFC 8446 §4.1.4).
    public var ecCurveName: String?
    /// TLS 1.0 and 1.1 are off unless `tlsv1` / `tlsv1_1` turn them on, as in current coturn.
    public var noTLSv1 = true
    public var noTLSv1_1 = true
    public var noTLSv1_2 = false
    /// OpenSSL keeps a TLS 1.3 session's records after the handshake, as it does TLS 1.2's,
    /// instead of relayd's own record layer (docs/tls.md, "After the handshake"). A reload applies
    /// it to new connections.
    public var tlsOpenSSLRecords = false

    // Protocol.
    public var fingerprint = CoreSettings.defaults.fingerprint
    /// Mobility (RFC 8016, docs/mobility.md): MOBILITY-TICKET on Allocate is granted to UDP
    /// clients. On by default; `no-mobility` turns it off (405). coturn's `mobility` is accepted.
    public var mobility = CoreSettings.defaults.mobility
    /// SOFTWARE attribute text (RFC 8489 §14.14); nil sends none.
    public var softwareAttribute: String?
    public var stunOnly = false
    /// NAT behaviour discovery (RFC 5780, docs/nat-discovery.md): OTHER-ADDRESS and
    /// RESPONSE-ORIGIN, CHANGE-REQUEST, RESPONSE-PORT and PADDING on Binding. Off by default, as
    /// in coturn: the extra attributes make every Binding response larger.
    public var rfc5780 = false
    /// coturn's `no-rfc5780`: wins over `rfc5780`.
    public var noRFC5780 = false
    /// Answers RFC 3489 ("classic") Binding requests, which carry no magic cookie, with
    /// MAPPED-ADDRESS, SOURCE-ADDRESS and CHANGED-ADDRESS (docs/nat-discovery.md).
    public var rfc3489Compatibility = false
    /// MAPPED-ADDRESS next to XOR-MAPPED-ADDRESS in every Binding response (RFC 8489 §14.1),
    /// for clients that cannot read the XOR form.
    public var stunBackwardCompatibility = CoreSettings.defaults.stunBackwardCompatibility
    public var noStun = false
    /// Targets of 300 (Try Alternate) redirects (RFC 8489 §10).
    public var alternateServers: [TransportAddress] = []

    // Metrics.
    public var prometheus = false
    public var prometheusPort: UInt16 = 9641
    /// Address of the metrics listener; nil means all addresses.
    public var prometheusAddress: IPAddress?

    // Process.
    public var logFile: String?
    public var syslog = false
    public var simpleLog = false
    public var verbose = false
    public var pidfile: String?
    /// Where the UDP allocations' state journal is kept, so that they survive a crash
    /// (docs/state-journal.md); unset: no journal.
    public var stateDir: String?
    /// coturn's SQLite user database (`userdb`, `db`): long-term users, REST
    /// secrets and realm options of this relay's realm, read live (docs/userdb.md).
    public var userDatabase: String?
    /// coturn's user database in PostgreSQL (`psql-userdb`, `sql-userdb`): a libpq connection
    /// string, which may hold a password (docs/userdb.md).
    public var postgresUserDatabase: String?
    /// coturn's user database in Redis (`redis-userdb`: coturn's `ip=… port=… dbname=…
    /// password=…` or a `redis://` URL), in coturn's key layout (docs/userdb.md).
    public var redisUserDatabase: RedisEndpoint?

    // Tenants (docs/tenants.md).
    /// The tenant files (`tenant=`), each named by its base name.
    public var tenantFiles: [String] = []
    /// The tenants those files define, read with the configuration (and again on SIGHUP).
    public var tenants: [TenantConfiguration] = []
    /// In a tenant file: the TLS server names (SNI) that pick the tenant and its certificate.
    public var serverNames: [String] = []
    /// In a tenant file: ORIGIN values that pick the tenant.
    public var origins: [String] = []
    /// In a tenant file: allocations and bytes per second held for the tenant on each node.
    public var reserveAllocations = 0
    public var reserveBPS = 0
    /// Whether this tenant's allocations may relay to another tenant's that allows it too
    /// (the main file's: the default tenant's).
    public var crossTenantRelay = false

    // relayd's own keys.
    public var apiListeningIP: IPAddress = .ipv4Loopback
    public var apiListeningPort: UInt16 = 8080
    public var apiKeys: [APIKey] = []
    /// Lifetime of credentials the credential service hands out, in seconds.
    public var credentialTTL = 86400
    /// The longest lifetime a caller may ask the credential service for, in seconds.
    public var credentialMaxTTL = 604800
    /// URIs the credential service returns; empty means derived from the listeners.
    public var advertisedURIs: [String] = []
    /// HTTPS for the API listener (docs/tls.md): `api-tls` serves it with
    /// `cert`/`pkey`; `api-cert`/`api-pkey` name its own certificate and key (and turn it on).
    public var apiTLS = false
    public var apiCert: String?
    public var apiPkey: String?
    /// Credential API requests per second per API key (or per client IP before authentication),
    /// with bursts of twice that; 0 turns the limit off.
    public var apiRateLimit = 20

    // Cluster (docs/cluster.md).
    /// The shared Redis (`cluster-redis`, or coturn's `redis-statsdb`); nil: the node stands alone.
    public var clusterRedis: RedisEndpoint?
    /// This node's name in the registry; nil means the host name.
    public var nodeName: String?
    /// Free-form `key=value` labels callers of the credential service may prefer (`region=eu-west`).
    public var nodeLabels: [NodeLabel] = []
    /// Allocations allowed across the whole cluster (0: unlimited); `total-quota` stays per node.
    public var clusterTotalQuota = 0
    /// Seconds a node's registry entry and quota share outlive its last heartbeat.
    public var clusterNodeTTL = 5
    public var logFormat: LogFormat = .text
    /// `log-level`: the least severe level logged (`info` logs two lines per allocation);
    /// `verbose` lowers it to at least `debug`.
    public var minimumLogLevel: Logger.Level = .info
    /// Seconds a draining server waits for allocations to end before it stops.
    public var drainTimeout = 3600
    public var maxPermissionsPerAllocation = CoreSettings.defaults.maxPermissionsPerAllocation
    /// `no-dtls` (coturn's key): no DTLS listener on the TLS ports (docs/dtls.md).
    public var noDTLS = false
    /// `no-tcp-relay` (coturn's key): TCP allocations (RFC 6062) get 442.
    public var noTCPRelay = false
    /// Peer connections one TCP allocation may hold at once, pending or piped (docs/tcp-relay.md).
    public var maxTCPRelayConnections = CoreSettings.defaults.maxTCPConnectionsPerAllocation
    /// 401/438 challenges per second per source IP that are not answered with valid credentials,
    /// over all loop threads (0: unlimited); docs/rate-limits.md.
    public var unauthRateLimit = 20
    /// Challenges a source may have unanswered at once before `unauthRateLimit` applies.
    public var unauthRateBurst = 1000
    /// Failed authentications (bad integrity, unknown or expired user) per second per source IP
    /// that still get their 401 (0: unlimited); bursts of twice that.
    public var authFailureRateLimit = 5
    /// New allocations per second per source IP (0: unlimited, the default: valid credentials
    /// are not refused for their source address unless the operator asks for it).
    public var allocateRateLimit = 0
    /// Seconds a TCP/TLS connection without an allocation may stay idle.
    public var tcpIdleTimeout = 30
    public var tlsHandshakeTimeout = 10
    /// Seconds between two looks at the certificate and key files (`cert`, `pkey`, `api-cert`,
    /// `api-pkey`); a change reloads as SIGHUP does (docs/tls.md). 0: only SIGHUP reloads.
    public var certCheckInterval = 60
    /// Concurrent TCP/TLS connections per source IP (0: unlimited, the default).
    public var maxConnectionsPerIP = 0
    /// Concurrent TCP/TLS connections and DTLS sessions per source IP without an allocation: a hard
    /// cap when set (0, the default: none; the fair share of `maxPendingConnections` applies).
    public var maxPendingConnectionsPerIP = 0
    /// Concurrent TCP/TLS connections and DTLS sessions without an allocation on the whole node;
    /// from half of it on, each source is held to its fair share (docs/rate-limits.md).
    public var maxPendingConnections = 5000
    public var maxConnections = 10000
    /// Relay established channels of UDP clients in the kernel (docs/kernel-fast-path.md).
    public var kernelOffload = KernelOffload.off
    /// `password-algorithms`: RFC 8489 §9.2.4's PASSWORD-ALGORITHMS, in order of preference.
    public var passwordAlgorithms = CoreSettings.defaults.passwordAlgorithms
    /// The BPF object to load; nil: next to the executable, or /usr/lib/relayd.
    public var kernelOffloadObject: String?
    /// Interfaces to attach to; empty: those carrying a listening or relay address.
    public var kernelOffloadInterfaces: [String] = []
    /// Also attach the XDP program, natively, where the interface's driver supports it
    /// (docs/kernel-fast-path.md).
    public var kernelOffloadXDP = false

    /// The `static-auth-secret` that `conf/relayd.conf` ships with: refused beyond loopback.
    public static let placeholderAuthSecret = "change-me-to-a-long-random-secret"

    /// Every setting at its default.
    public init() {}

    /// The SOFTWARE text used when `software-attribute` is given without text.
    public static let defaultSoftwareAttribute = RelaydVersion.string
}
