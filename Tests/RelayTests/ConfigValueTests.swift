import Logging
import Relay
import RelayCore
import StunCodec
import Testing

/// Every value type a key can take, read from a one-line file into the typed configuration.
@Suite struct ConfigValueTests {
    private static let file = "conf/relayd.conf"

    /// The configuration `line` should give: the defaults (with `no-auth`) changed by `change`.
    private static func expect(_ line: String, _ change: (inout RelayConfiguration) -> Void) -> (
        String, RelayConfiguration
    ) {
        var config = RelayConfiguration()
        config.noAuth = true
        change(&config)
        return (line, config)
    }

    private static func ip(_ text: String) -> IPAddress { IPAddress(text)! }

    private static func load(_ line: String) throws -> ConfigLoadResult {
        try RelayConfiguration.load(fileText: "\(line)\nno-auth\n", fileName: file)
    }

    static let goodValues: [(String, RelayConfiguration)] = [
        expect("listening-port=3479") { $0.listeningPort = 3479 },
        expect("tls-listening-port=5350") { $0.tlsListeningPort = 5350 },
        expect("alt-listening-port=3480") { $0.altListeningPort = 3480 },
        expect("alt-listening-port=0") { $0.altListeningPort = nil },
        expect("alt-tls-listening-port=5351") { $0.altTLSListeningPort = 5351 },
        expect("listening-ip=::1") { $0.listeningIPs = [ip("::1")] },
        expect("no-udp") { $0.noUDP = true },
        expect("no-tcp") { $0.noTCP = true },
        expect("no-tls") { $0.noTLS = true },
        expect("relay-ip=10.0.0.1") { $0.relayIPs = [ip("10.0.0.1")] },
        expect("external-ip=203.0.113.1") { $0.externalIPs = [.init(publicIP: ip("203.0.113.1"))] },
        expect("external-ip=203.0.113.1/10.0.0.1") {
            $0.externalIPs = [.init(publicIP: ip("203.0.113.1"), privateIP: ip("10.0.0.1"))]
        },
        expect("external-ip=2001:db8::1/fd00::1") {
            $0.externalIPs = [.init(publicIP: ip("2001:db8::1"), privateIP: ip("fd00::1"))]
        },
        expect("min-port=50000") { $0.minPort = 50000 },
        expect("max-port=60000") { $0.maxPort = 60000 },
        expect("relay-threads=4") { $0.relayThreads = 4 },
        expect("relay-threads=0") { $0.relayThreads = 1 },
        expect("realm=example.org") { $0.realm = "example.org" },
        expect("rest-api-separator=-") { $0.restAPISeparator = "-" },
        expect("stale-nonce=300") { $0.staleNonce = 300 },
        expect("stale-nonce") { $0.staleNonce = 600 },
        expect("password-algorithms=sha256") { $0.passwordAlgorithms = [.sha256] },
        expect("password-algorithms=md5,sha256") { $0.passwordAlgorithms = [.md5, .sha256] },
        expect("password-algorithms = SHA1 , sha256") { $0.passwordAlgorithms = [.md5, .sha256] },
        expect("user-quota=10") { $0.userQuota = 10 },
        expect("total-quota=100") { $0.totalQuota = 100 },
        expect("max-allocate-lifetime=1800") { $0.maxAllocateLifetime = 1800 },
        expect("channel-lifetime=300") { $0.channelLifetime = 300 },
        expect("permission-lifetime=120") { $0.permissionLifetime = 120 },
        expect("max-bps=125000") { $0.maxBPS = 125000 },
        expect("bps-capacity=10000000000") { $0.bpsCapacity = 10_000_000_000 },
        expect("denied-peer-ip=10.0.0.0/8") { $0.deniedPeerIPs = [IPRange("10.0.0.0/8")!] },
        expect("allowed-peer-ip=10.0.0.5-10.0.0.9") { $0.allowedPeerIPs = [IPRange("10.0.0.5-10.0.0.9")!] },
        expect("allow-loopback-peers") { $0.allowLoopbackPeers = true },
        expect("no-multicast-peers") { $0.noMulticastPeers = true },
        expect("cert=/etc/relayd/cert.pem") { $0.cert = "/etc/relayd/cert.pem" },
        expect("pkey=/etc/relayd/key.pem") { $0.pkey = "/etc/relayd/key.pem" },
        expect("pkey-pwd=hunter2") { $0.pkeyPassword = "hunter2" },
        expect("cipher-list=ECDHE+AESGCM") { $0.cipherList = "ECDHE+AESGCM" },
        expect("tlsv1") { $0.noTLSv1 = false },
        expect("tlsv1_1") { $0.noTLSv1_1 = false },
        expect("no-tlsv1=false") { $0.noTLSv1 = false },
        expect("no-tlsv1") { $0.noTLSv1 = true },
        expect("no-tlsv1_1") { $0.noTLSv1_1 = true },
        expect("no-tlsv1_2") { $0.noTLSv1_2 = true },
        expect("no-sslv3") { _ in },
        expect("fingerprint") { $0.fingerprint = true },
        expect("software-attribute") { $0.softwareAttribute = RelayConfiguration.defaultSoftwareAttribute },
        expect("software-attribute=1") { $0.softwareAttribute = RelayConfiguration.defaultSoftwareAttribute },
        expect("software-attribute=acme TURN") { $0.softwareAttribute = "acme TURN" },
        expect("software-attribute=false") { $0.softwareAttribute = nil },
        expect("no-software-attribute") { $0.softwareAttribute = nil },
        expect("stun-only") { $0.stunOnly = true },
        expect("no-stun") { $0.noStun = true },
        expect("alternate-server=203.0.113.2") {
            $0.alternateServers = [TransportAddress(ip: ip("203.0.113.2"), port: 3478)]
        },
        expect("alternate-server=203.0.113.2:3479") {
            $0.alternateServers = [TransportAddress(ip: ip("203.0.113.2"), port: 3479)]
        },
        expect("alternate-server=[2001:db8::2]:3479") {
            $0.alternateServers = [TransportAddress(ip: ip("2001:db8::2"), port: 3479)]
        },
        expect("prometheus") { $0.prometheus = true },
        expect("prometheus-port=9642") { $0.prometheusPort = 9642 },
        expect("prometheus-address=127.0.0.1") { $0.prometheusAddress = ip("127.0.0.1") },
        expect("log-file=/var/log/relayd.log") { $0.logFile = "/var/log/relayd.log" },
        expect("syslog") { $0.syslog = true },
        expect("simple-log") { $0.simpleLog = true },
        expect("verbose") { $0.verbose = true },
        expect("Verbose") { $0.verbose = true },
        expect("pidfile=/run/relayd.pid") { $0.pidfile = "/run/relayd.pid" },
        expect("no-cli") { _ in },
        expect("api-listening-ip=::1") { $0.apiListeningIP = ip("::1") },
        expect("api-listening-port=8443") { $0.apiListeningPort = 8443 },
        expect("api-key=ops:t0k3n:with:colons") { $0.apiKeys = [.init(name: "ops", token: "t0k3n:with:colons")] },
        expect("api-key=ops:t0k3n:admin") { $0.apiKeys = [.init(name: "ops", token: "t0k3n", scope: .admin)] },
        expect("api-key=web:t0k3n:credentials") { $0.apiKeys = [.init(name: "web", token: "t0k3n")] },
        expect("credential-ttl=3600") { $0.credentialTTL = 3600 },
        expect("credential-max-ttl=86400") { $0.credentialMaxTTL = 86400 },
        expect("advertised-uri=turns:turn.example.org:5349?transport=tcp") {
            $0.advertisedURIs = ["turns:turn.example.org:5349?transport=tcp"]
        },
        expect("log-format=json") { $0.logFormat = .json },
        expect("log-format=TEXT") { $0.logFormat = .text },
        expect("log-level=notice") { $0.minimumLogLevel = .notice },
        expect("log-level=Warning") { $0.minimumLogLevel = .warning },
        expect("drain-timeout=0") { $0.drainTimeout = 0 },
        expect("max-permissions-per-allocation=8") { $0.maxPermissionsPerAllocation = 8 },
        expect("unauth-rate-limit=5") { $0.unauthRateLimit = 5 },
        expect("unauth-rate-burst=50") { $0.unauthRateBurst = 50 },
        expect("auth-failure-rate-limit=0") { $0.authFailureRateLimit = 0 },
        expect("allocate-rate-limit=2") { $0.allocateRateLimit = 2 },
        expect("tcp-idle-timeout=60") { $0.tcpIdleTimeout = 60 },
        expect("tls-handshake-timeout=5") { $0.tlsHandshakeTimeout = 5 },
        expect("max-connections-per-ip=10") { $0.maxConnectionsPerIP = 10 },
        expect("max-connections-per-ip=0") { $0.maxConnectionsPerIP = 0 },
        expect("max-pending-connections-per-ip=50") { $0.maxPendingConnectionsPerIP = 50 },
        expect("max-pending-connections=80") { $0.maxPendingConnections = 80 },
        expect("max-connections=500") { $0.maxConnections = 500 },
    ]

    @Test(arguments: goodValues)
    func keyTakesItsValue(line: String, expected: RelayConfiguration) throws {
        let result = try Self.load(line)
        #expect(result.configuration == expected)
        #expect(result.warnings.isEmpty)
    }

    @Test(arguments: [
        ("1", true), ("yes", true), ("Y", true), ("true", true), ("on", true), ("ON", true), ("", true),
        ("0", false), ("no", false), ("false", false), ("off", false), ("Off", false),
    ])
    func flagsTakeCoturnBooleans(value: String, on: Bool) throws {
        #expect(try Self.load("verbose=\(value)").configuration.verbose == on)
    }

    /// `log-level` sets the level; coturn's `verbose` lowers it to debug, never raises it.
    @Test(arguments: [
        ("", Logger.Level.info), ("verbose", .debug), ("log-level=warning", .warning),
        ("log-level=warning\nverbose", .debug), ("log-level=trace\nverbose", .trace), ("log-level=error", .error),
    ])
    func logLevelComesFromLogLevelAndVerbose(text: String, level: Logger.Level) throws {
        #expect(try Self.load(text).configuration.logLevel == level)
    }

    @Test func defaultsAreCoturnsAndTheBriefs() {
        let config = RelayConfiguration()
        #expect(config.listeningPort == 3478 && config.tlsListeningPort == 5349)
        #expect(config.altListeningPort == nil && config.altTLSListeningPort == nil)
        #expect(config.minPort == 49152 && config.maxPort == 65535)
        #expect(config.relayThreads == nil)
        #expect(config.realm == "relayd" && config.restAPISeparator == ":")
        #expect(config.staleNonce == 600)
        #expect(config.maxAllocateLifetime == 3600 && config.channelLifetime == 600 && config.permissionLifetime == 300)
        #expect(config.userQuota == 0 && config.totalQuota == 0 && config.maxBPS == 0 && config.bpsCapacity == 0)
        #expect(config.softwareAttribute == nil && !config.fingerprint)
        #expect(config.noTLSv1 && config.noTLSv1_1 && !config.noTLSv1_2)
        #expect(config.prometheusPort == 9641 && config.prometheusAddress == nil)
        #expect(config.apiListeningIP == IPAddress("127.0.0.1") && config.apiListeningPort == 8080)
        #expect(config.credentialTTL == 86400 && config.credentialMaxTTL == 604800)
        #expect(config.logFormat == .text && config.drainTimeout == 3600)
        #expect(config.maxPermissionsPerAllocation == 32)
        // Per-source limits charge only what abuse produces (docs/rate-limits.md).
        #expect(config.unauthRateLimit == 20 && config.unauthRateBurst == 1000 && config.authFailureRateLimit == 5)
        #expect(config.allocateRateLimit == 0)
        #expect(config.tcpIdleTimeout == 30 && config.tlsHandshakeTimeout == 10)
        #expect(config.maxConnectionsPerIP == 0 && config.maxPendingConnectionsPerIP == 0)
        #expect(config.maxPendingConnections == 5000 && config.maxConnections == 10000)
        #expect(config.maxConnections == 10000)
    }

    @Test func userEntriesHoldPasswordsOrMD5Keys() throws {
        let text = """
            lt-cred-mech
            user=alice:secret
            user=carol:pa:ss word
            user=bob:0x0123456789ABCDEFfedcba9876543210
            """
        let users = try RelayConfiguration.load(fileText: text, fileName: Self.file).configuration.users
        #expect(
            users == [
                .init(name: "alice", credential: .password("secret")),
                .init(name: "carol", credential: .password("pa:ss word")),
                .init(
                    name: "bob",
                    credential: .key([
                        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10,
                    ])),
            ])
    }

    @Test(arguments: [
        ("min-port=abc", "key 'min-port': expected a port number 1-65535, got 'abc'"),
        ("listening-port=0", "key 'listening-port': expected a port number 1-65535, got '0'"),
        ("listening-port=65536", "key 'listening-port': expected a port number 1-65535, got '65536'"),
        ("listening-port=+80", "key 'listening-port': expected a port number 1-65535, got '+80'"),
        ("listening-port=", "key 'listening-port': expected a port number 1-65535, got ''"),
        ("alt-listening-port=70000", "key 'alt-listening-port': expected a port number 0-65535, got '70000'"),
        ("user-quota=-1", "key 'user-quota': expected an integer 0-2147483647, got '-1'"),
        ("relay-threads=2000", "key 'relay-threads': expected an integer 0-1024, got '2000'"),
        ("stale-nonce=0", "key 'stale-nonce': expected an integer 1-2147483647, got '0'"),
        ("max-connections=1e3", "key 'max-connections': expected an integer 1-2147483647, got '1e3'"),
        ("max-bps=fast", "key 'max-bps': expected an integer 0-4294967295, got 'fast'"),
        ("max-bps=5000000000", "key 'max-bps': expected an integer 0-4294967295, got '5000000000'"),
        ("verbose=maybe", "key 'verbose': expected a boolean (yes/no, true/false, on/off, 1/0), got 'maybe'"),
        ("listening-ip=localhost", "key 'listening-ip': expected an IP address, got 'localhost'"),
        ("prometheus-address=*", "key 'prometheus-address': expected an IP address, got '*'"),
        (
            "denied-peer-ip=10.0.0.9-10.0.0.1",
            "key 'denied-peer-ip': expected an IP address, a range 'first-last' or a CIDR prefix 'address/length', got '10.0.0.9-10.0.0.1'"
        ),
        (
            "external-ip=203.0.113.1/::1",
            "key 'external-ip': expected 'public-ip' or 'public-ip/private-ip' of one address family, got '203.0.113.1/::1'"
        ),
        (
            "external-ip=1.2.3.4/5.6.7.8/9.9.9.9",
            "key 'external-ip': expected 'public-ip' or 'public-ip/private-ip' of one address family, got '1.2.3.4/5.6.7.8/9.9.9.9'"
        ),
        (
            "alternate-server=turn.example.org:3478",
            "key 'alternate-server': expected 'ip', 'ip:port' or '[ipv6]:port', got 'turn.example.org:3478'"
        ),
        (
            "alternate-server=1.2.3.4:0",
            "key 'alternate-server': expected 'ip', 'ip:port' or '[ipv6]:port', got '1.2.3.4:0'"
        ),
        ("log-format=xml", "key 'log-format': expected 'text' or 'json', got 'xml'"),
        (
            "log-level=verbose",
            "key 'log-level': expected 'trace', 'debug', 'info', 'notice', 'warning', 'error' or 'critical', got 'verbose'"
        ),
        (
            "advertised-uri=https://example.org",
            "key 'advertised-uri': expected a stun:, stuns:, turn: or turns: URI, got 'https://example.org'"
        ),
        ("advertised-uri=turn:", "key 'advertised-uri': expected a stun:, stuns:, turn: or turns: URI, got 'turn:'"),
        ("rest-api-separator=::", "key 'rest-api-separator': expected a single character, got '::'"),
        (
            "rest-api-separator=\u{200B}",
            "key 'rest-api-separator': expected one character a STUN USERNAME may hold (no control or format character), got '\u{200B}'"
        ),
        ("realm=", "key 'realm': expected a non-empty value of at most 127 characters, got ''"),
        (
            "realm=\(String(repeating: "r", count: 128))",
            "key 'realm': expected a non-empty value of at most 127 characters, got '\(String(repeating: "r", count: 128))'"
        ),
        (
            "software-attribute=\(String(repeating: "s", count: 128))",
            "key 'software-attribute': expected text of at most 127 characters, got '\(String(repeating: "s", count: 128))'"
        ),
        ("min-port", "key 'min-port': missing value, expected a port number 1-65535"),
        ("realm", "key 'realm': missing value, expected a non-empty value of at most 127 characters"),
        (
            "password-algorithms=sha512",
            "key 'password-algorithms': expected 'sha256' and/or 'md5' ('sha1' is md5), comma-separated, each once, got 'sha512'"
        ),
        (
            "password-algorithms=md5,sha1",
            "key 'password-algorithms': expected 'sha256' and/or 'md5' ('sha1' is md5), comma-separated, each once, got 'md5,sha1'"
        ),
    ])
    func badValueNamesFileLineKeyAndValue(line: String, message: String) {
        let error = #expect(throws: ConfigError.self) { try Self.load(line) }
        #expect(error?.description == "conf/relayd.conf:1: \(message)")
        #expect(error?.key == line.split(separator: "=").first.map(String.init))
    }

    @Test func badValueOnLineSeven() {
        let text = "# relayd\n\nlistening-port=3478\nno-auth\n\nrealm=example.org\nmin-port=abc\n"
        let error = #expect(throws: ConfigError.self) {
            try RelayConfiguration.load(fileText: text, fileName: Self.file)
        }
        #expect(error?.code == .invalidValue)
        #expect(error?.description == "conf/relayd.conf:7: key 'min-port': expected a port number 1-65535, got 'abc'")
    }

    @Test(
        "A user= name that is no valid STUN USERNAME is an error naming file, line and key",
        arguments: [
            ("user=a\u{7}b:pw", "U+0007"), ("user=a\u{0}b:pw", "U+0000"), ("user=a\u{1B}[31m:pw", "U+001B"),
            ("user=\(String(repeating: "n", count: 509)):pw", "longer than 508 bytes"),
        ])
    func userNameMustBeAUsername(line: String, reason: String) {
        let error = #expect(throws: ConfigError.self) { try Self.load(line) }
        #expect(error?.key == "user")
        #expect(error?.description.hasPrefix("conf/relayd.conf:1: key 'user': expected a user name") == true)
        #expect(error?.description.contains(reason) == true)
        #expect(error?.description.contains("pw") == false)
    }

    @Test(arguments: [
        ("user=alice", "key 'user': expected 'name:password' or 'name:0x' followed by a 32-digit hex key", "alice"),
        ("user=:pw0rd", "key 'user': expected 'name:password' or 'name:0x' followed by a 32-digit hex key", "pw0rd"),
        (
            "user=bob:0x0123", "key 'user': expected 'name:password' or 'name:0x' followed by a 32-digit hex key",
            "0x0123"
        ),
        (
            "user=bob:0xZZ23456789abcdef0123456789abcdef",
            "key 'user': expected 'name:password' or 'name:0x' followed by a 32-digit hex key", "ZZ23"
        ),
        ("api-key=t0k3nOnly", "key 'api-key': expected 'name:token' or 'name:token:admin'", "t0k3nOnly"),
        ("api-key=ops:", "key 'api-key': expected 'name:token' or 'name:token:admin'", "ops:"),
        ("api-key=ops::admin", "key 'api-key': expected 'name:token' or 'name:token:admin'", "ops::admin"),
        (
            "static-auth-secret=", "key 'static-auth-secret': expected a non-empty value of at most 4096 characters",
            "''"
        ),
        (
            "pkey-pwd", "key 'pkey-pwd': missing value, expected a non-empty value of at most 4096 characters",
            "pkey-pwd="
        ),
    ])
    func secretValuesAreNeverEchoed(line: String, message: String, secret: String) {
        let error = #expect(throws: ConfigError.self) { try Self.load(line) }
        #expect(error?.description == "conf/relayd.conf:1: \(message)")
        #expect(error?.description.contains(secret) == false)
    }
}
