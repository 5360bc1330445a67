import Relay
import Testing

/// Which keys exist: coturn's keys (docs/compatibility.md), relayd's own, and coturn keys that only warn.
@Suite struct ConfigKeysTests {
    private let file = "conf/relayd.conf"

    private func load(_ text: String, _ arguments: [String] = []) throws -> ConfigLoadResult {
        try RelayConfiguration.load(fileText: text, fileName: file, arguments: arguments)
    }

    /// Every coturn key relayd implements, with a value where it needs one.
    @Test(arguments: [
        "listening-port=3478", "tls-listening-port=5349", "alt-listening-port=3479", "alt-tls-listening-port=5350",
        "listening-ip=127.0.0.1", "no-udp", "no-tcp", "no-tls",
        "relay-ip=127.0.0.1", "external-ip=203.0.113.1/10.0.0.1", "min-port=49152", "max-port=65535", "relay-threads=2",
        "realm=example.org", "use-auth-secret", "static-auth-secret=north", "rest-api-separator=:", "lt-cred-mech",
        "user=alice:pw", "user=bob:0x0123456789abcdef0123456789abcdef", "stale-nonce=600",
        "user-quota=1", "total-quota=2", "max-allocate-lifetime=3600", "channel-lifetime=600",
        "permission-lifetime=300",
        "max-bps=0", "bps-capacity=0",
        "denied-peer-ip=10.0.0.0-10.255.255.255", "denied-peer-ip=10.0.0.0/8", "allowed-peer-ip=10.0.0.5",
        "allow-loopback-peers", "no-multicast-peers",
        "cert=cert.pem", "pkey=key.pem", "pkey-pwd=pw", "cipher-list=HIGH", "no-tlsv1", "no-tlsv1_1", "no-tlsv1_2",
        "fingerprint", "software-attribute", "no-software-attribute", "stun-only", "alternate-server=203.0.113.9:3478",
        "prometheus", "prometheus-port=9641", "prometheus-address=127.0.0.1",
        "log-file=relayd.log", "syslog", "simple-log", "verbose", "pidfile=relayd.pid", "no-cli",
        "api-listening-ip=127.0.0.1", "api-listening-port=8080", "api-key=ops:token", "credential-ttl=86400",
        "credential-max-ttl=604800", "advertised-uri=turn:example.org:3478", "log-format=json", "log-level=notice",
        "drain-timeout=3600",
        "max-permissions-per-allocation=32", "unauth-rate-limit=20", "allocate-rate-limit=10", "tcp-idle-timeout=30",
        "tls-handshake-timeout=10", "max-connections-per-ip=100", "max-connections=10000",
        "ec-curve-name=prime256v1",
    ])
    func compatKeyIsAcceptedSilently(line: String) throws {
        let result = try load("\(line)\n", ["--use-auth-secret", "--static-auth-secret=base"])
        #expect(result.warnings.isEmpty)
    }

    /// coturn keys relayd does not implement: a warning naming file, line and key, never silence.
    @Test(arguments: [
        "no-loopback-peers", "secure-stun", "server-relay", "dh2066", "no-stdout-log", "cli-port=5766",
        "cli-password=x", "web-admin", "mysql-userdb=host=db",
        "mongo-userdb=mongodb://db", "oauth", "dh-file=dh.pem",
        "check-origin-consistency", "allocation-default-address-family=ipv6", "aux-server=10.0.0.1:3478",
        "udp-self-balance", "response-origin-only-with-rfc5780", "keep-address-family",
        "dtls-listening-port=5350", "tcp-proxy-port=5555", "daemon", "CA-file=ca.pem", "cpus=4",
    ])
    func unimplementedCoturnKeyWarns(line: String) throws {
        let key = String(line.prefix { $0 != "=" })
        let result = try load("no-auth\n\n\(line)\n")
        try #require(result.warnings.count == 1)
        #expect(
            result.warnings[0].hasPrefix(
                "conf/relayd.conf:3: key '\(key)' is a coturn option relayd does not implement; ignored"))
    }

    /// Names only OpenSSL can judge are tried when the configuration loads: an unknown one is
    /// an error naming file, line and key.
    @Test(arguments: [
        ("ec-curve-name=secp384r1", nil), ("ec-curve-name=X25519:prime256v1", nil), ("cipher-list=ECDHE+AESGCM", nil),
        ("ec-curve-name=bogus", "ec-curve-name"), ("ec-curve-name=secp384r1:nope", "ec-curve-name"),
        ("cipher-list=nonsense", "cipher-list"),
    ] as [(String, String?)])
    func tlsNamesOpenSSLKnows(line: String, key: String?) throws {
        guard let key else {
            _ = try load("no-auth\n\(line)\n")
            return
        }
        let error = #expect(throws: ConfigError.self) { try load("no-auth\n\(line)\n") }
        #expect(error?.key == key)
        #expect(error?.description.hasPrefix("\(file):2: key '\(key)'") == true, "\(error?.description ?? "")")
    }

    @Test func unimplementedKeyWarningCarriesAHint() throws {
        let result = try load("no-auth\nmysql-userdb=host=db\n")
        #expect(
            result.warnings == [
                "conf/relayd.conf:2: key 'mysql-userdb' is a coturn option relayd does not implement; ignored "
                    + "(relayd reads coturn's SQLite ('userdb'), PostgreSQL ('psql-userdb') and Redis ('redis-userdb') user databases, not this one)"
            ])
    }

    @Test(arguments: ["no-cli", "no-sslv2", "no-sslv3", "no-cli=true"])
    func quietlyAcceptedKeys(line: String) throws {
        let result = try load("no-auth\n\(line)\n")
        #expect(result.warnings.isEmpty)
        #expect(result.configuration == (try load("no-auth\n").configuration))
    }

    @Test func repeatedSingleValuedKeyWarnsAndTheLastWins() throws {
        let result = try load("no-auth\nrealm=first.example\n\nrealm=second.example\n")
        #expect(result.configuration.realm == "second.example")
        #expect(result.warnings == ["conf/relayd.conf:4: key 'realm' repeats line 2; the last value wins"])
    }

    @Test func repeatedKeyOnTheCommandLineWarns() throws {
        let result = try load("no-auth\n", ["-p", "3479", "--listening-port=3480"])
        #expect(result.configuration.listeningPort == 3480)
        #expect(
            result.warnings == ["command line: key 'listening-port' repeats an earlier argument; the last value wins"])
    }

    @Test func repeatableKeysAccumulateWithoutWarning() throws {
        let text =
            "no-auth\ndenied-peer-ip=10.0.0.0/8\ndenied-peer-ip=192.168.0.0/16\nallowed-peer-ip=10.0.0.5-10.0.0.9\n"
        let result = try load(text)
        #expect(result.warnings.isEmpty)
        #expect(result.configuration.deniedPeerIPs.map(\.description) == ["10.0.0.0/8", "192.168.0.0/16"])
        #expect(result.configuration.allowedPeerIPs.map(\.description) == ["10.0.0.5-10.0.0.9"])
    }
}
