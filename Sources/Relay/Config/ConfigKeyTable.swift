import RelayCore
import StunCodec

/// Every key relayd accepts, by name: coturn's (docs/compatibility.md), relayd's own, and the coturn keys
/// it knows but does not implement.
enum ConfigKeyTable {
    static let byName: [String: ConfigKey] = {
        var table: [String: ConfigKey] = [:]
        for key in implemented + unimplementedCoturnKeys {
            precondition(table.updateValue(key, forKey: key.name) == nil, "duplicate config key \(key.name)")
        }
        return table
    }()

    static func key(named name: String) -> ConfigKey? { byName[name] }

    /// Seconds and counts stay within 32 bits so that later arithmetic cannot overflow.
    private static let seconds = 1...Int(Int32.max)
    private static let count = 0...Int(Int32.max)
    private static let positiveCount = 1...Int(Int32.max)

    static let implemented: [ConfigKey] =
        listeners + relay + auth + limits + peerPolicy + tls + proto + metrics
        + process + relaydOwn + cluster + tenancy

    private static let listeners: [ConfigKey] = [
        .port("listening-port", \.listeningPort).needsRestart(),
        .port("tls-listening-port", \.tlsListeningPort).needsRestart(),
        .portOrZero("alt-listening-port", \.altListeningPort).needsRestart(),
        .portOrZero("alt-tls-listening-port", \.altTLSListeningPort).needsRestart(),
        .list("listening-ip", .ipAddress, \.listeningIPs, parse: ConfigValueParser.ipAddress).needsRestart(),
        .flag("no-udp", \.noUDP).needsRestart(),
        .flag("no-tcp", \.noTCP).needsRestart(),
        .flag("no-tls", \.noTLS).needsRestart(),
        .flag("no-tcp-relay", \.noTCPRelay),
        .flag("no-dtls", \.noDTLS).needsRestart(),
        .list("proxy-protocol-from", .ipRange, \.proxyProtocolFrom, parse: ConfigValueParser.ipRange).needsRestart(),
    ]

    private static let relay: [ConfigKey] = [
        .list("relay-ip", .ipAddress, \.relayIPs, parse: ConfigValueParser.ipAddress).needsRestart(),
        .list("external-ip", .externalIP, \.externalIPs, parse: ConfigValueParser.externalIP),
        .port("min-port", \.minPort).needsRestart(),
        .port("max-port", \.maxPort).needsRestart(),
        // coturn's 0 (relay inside the listener thread) becomes one relay thread.
        ConfigKey(
            "relay-threads", .integer(0...1024), field: .optional(\.relayThreads),
            support: .implemented { config, text throws(ConfigValueError) in
                config.relayThreads = max(1, try ConfigValueParser.integer(text, in: 0...1024))
            }
        ).needsRestart(),
    ]

    private static let auth: [ConfigKey] = [
        // RFC 8489 §14.9: REALM is fewer than 128 characters.
        .string("realm", \.realm, maxLength: 127),
        .flag("use-auth-secret", \.useAuthSecret),
        .list("static-auth-secret", .string(maxLength: 4096), \.staticAuthSecrets, secret: true) {
            text throws(ConfigValueError) in try ConfigValueParser.string(text)
        },
        // One secret a line, the first signing (docs/configuration.md, "Secrets in files").
        .secretFile("static-auth-secret-file", \.staticAuthSecretFile) { config, values throws(ConfigValueError) in
            config.staticAuthSecrets = try values.map { v throws(ConfigValueError) in try ConfigValueParser.string(v) }
        },
        ConfigKey(
            "rest-api-separator", .character, field: .value(\.restAPISeparator),
            support: .implemented { config, text throws(ConfigValueError) in
                let separator = try ConfigValueParser.character(text)
                // It becomes part of every REST USERNAME (RFC 8489 §14.3): OpaqueString allows it.
                guard UsernameCheck.firstDisallowed(in: separator) == nil else {
                    throw ConfigValueError(expected: "one character a STUN USERNAME may hold (no control or format character)")
                }
                config.restAPISeparator = separator
            }),
        .flag("lt-cred-mech", \.ltCredMech),
        .list(
            "user", .user, \.users, secret: true, show: { "\($0.name):\(RelayConfiguration.redaction)" },
            parse: ConfigValueParser.user),
        .flag("no-auth", \.noAuth),
        ConfigKey(
            "password-algorithms", .passwordAlgorithms,
            field: ConfigField(\.passwordAlgorithms) { [$0.map { $0 == .sha256 ? "sha256" : "md5" }.joined(separator: ",")] },
            support: .implemented { config, text throws(ConfigValueError) in
                config.passwordAlgorithms = try ConfigValueParser.passwordAlgorithms(text)
            }),
        .integer("stale-nonce", seconds, \.staleNonce, bare: 600),
    ]

    /// The defaults of the core's settings, which the bare keys stand for.
    private static let core = CoreSettings.defaults

    private static let limits: [ConfigKey] = [
        .integer("user-quota", count, \.userQuota),
        .integer("total-quota", count, \.totalQuota),
        .integer("max-allocate-lifetime", seconds, \.maxAllocateLifetime, bare: core.maxAllocateLifetime),
        .integer("channel-lifetime", seconds, \.channelLifetime, bare: core.channelLifetime),
        .integer("permission-lifetime", seconds, \.permissionLifetime, bare: core.permissionLifetime),
        .integer("max-bps", 0...Int(UInt32.max), \.maxBPS),
        .integer("bps-capacity", 0...Int.max, \.bpsCapacity),
    ]

    private static let peerPolicy: [ConfigKey] = [
        .list("denied-peer-ip", .ipRange, \.deniedPeerIPs, parse: ConfigValueParser.ipRange),
        .list("allowed-peer-ip", .ipRange, \.allowedPeerIPs, parse: ConfigValueParser.ipRange),
        .flag("allow-loopback-peers", \.allowLoopbackPeers),
        .flag("no-multicast-peers", \.noMulticastPeers),
    ]

    private static let tls: [ConfigKey] = [
        .string("cert", \.cert),
        .string("pkey", \.pkey),
        .string("pkey-pwd", \.pkeyPassword, secret: true),
        .secretFile("pkey-pwd-file", \.pkeyPasswordFile, single: true) { config, values throws(ConfigValueError) in
            config.pkeyPassword = values[0]
        },
        .string("cipher-list", \.cipherList),
        .string("ec-curve-name", \.ecCurveName),
        .flag("no-tlsv1", \.noTLSv1),
        .flag("no-tlsv1_1", \.noTLSv1_1),
        .flag("no-tlsv1_2", \.noTLSv1_2),
        .flag("tls-openssl-records", \.tlsOpenSSLRecords),
        .inverseFlag("tlsv1", \.noTLSv1),
        .inverseFlag("tlsv1_1", \.noTLSv1_1),
        .ignored("no-sslv2"),
        .ignored("no-sslv3"),
    ]

    private static let proto: [ConfigKey] = [
        .flag("fingerprint", \.fingerprint),
        .flag("mobility", \.mobility),
        .inverseFlag("no-mobility", \.mobility),
        // RFC 8489 §14.14: SOFTWARE is fewer than 128 characters.
        ConfigKey(
            "software-attribute", .optionalText(maxLength: 127), arity: .optional,
            field: .optional(\.softwareAttribute),
            support: .implemented { config, text throws(ConfigValueError) in
                config.softwareAttribute = try ConfigValueParser.optionalText(
                    text, fallback: RelayConfiguration.defaultSoftwareAttribute, maxLength: 127)
            }),
        ConfigKey(
            "no-software-attribute", .flag, arity: .optional,
            support: .implemented { config, text throws(ConfigValueError) in
                let off = try ConfigValueParser.bool(text)
                config.softwareAttribute =
                    off ? nil : config.softwareAttribute ?? RelayConfiguration.defaultSoftwareAttribute
            }),
        .flag("stun-only", \.stunOnly),
        .flag("rfc5780", \.rfc5780).needsRestart(),
        .flag("no-rfc5780", \.noRFC5780).needsRestart(),
        .flag("rfc3489-compatibility", \.rfc3489Compatibility),
        .flag("stun-backward-compatibility", \.stunBackwardCompatibility),
        .flag("no-stun", \.noStun),
        .list("alternate-server", .transportAddress, \.alternateServers, parse: ConfigValueParser.transportAddress),
    ]

    private static let metrics: [ConfigKey] = [
        .flag("prometheus", \.prometheus).needsRestart(),
        .port("prometheus-port", \.prometheusPort).needsRestart(),
        .address("prometheus-address", \.prometheusAddress).needsRestart(),
    ]

    private static let process: [ConfigKey] = [
        .string("log-file", \.logFile).needsRestart(),
        .flag("syslog", \.syslog).needsRestart(),
        .flag("simple-log", \.simpleLog).needsRestart(),
        .flag("verbose", \.verbose),
        .flag("Verbose", \.verbose, alias: true),
        .string("pidfile", \.pidfile).needsRestart(),
        .string("state-dir", \.stateDir).needsRestart(),
        // coturn's user database (docs/userdb.md): SQLite and PostgreSQL, under coturn's names.
        .string("userdb", \.userDatabase).needsRestart(),
        .string("db", \.userDatabase, alias: true).needsRestart(),
        .string("psql-userdb", \.postgresUserDatabase, secret: true).needsRestart(),
        .string("sql-userdb", \.postgresUserDatabase, secret: true, alias: true).needsRestart(),
        .ignored("no-cli"),
    ]

    /// Tenants (docs/tenants.md): `tenant=` in the main file; the others in a tenant file only,
    /// but `cross-tenant-relay`, which the main file sets for the default tenant.
    private static let tenancy: [ConfigKey] = [
        .list("tenant", .string(maxLength: 4096), \.tenantFiles) { text throws(ConfigValueError) in
            try ConfigValueParser.string(text)
        },
        .list("tls-server-name", .string(maxLength: 253), \.serverNames) { text throws(ConfigValueError) in
            try ConfigValueParser.string(text, maxLength: 253).lowercased()
        },
        .list("origin", .string(maxLength: 1024), \.origins) { text throws(ConfigValueError) in
            try ConfigValueParser.string(text, maxLength: 1024)
        },
        .integer("reserve-allocations", count, \.reserveAllocations),
        .integer("reserve-bps", 0...Int(Int32.max), \.reserveBPS),
        .flag("cross-tenant-relay", \.crossTenantRelay),
    ]

    private static let relaydOwn: [ConfigKey] = [
        .address("api-listening-ip", \.apiListeningIP).needsRestart(),
        .port("api-listening-port", \.apiListeningPort).needsRestart(),
        .list(
            "api-key", .apiKey, \.apiKeys, secret: true, show: { "\($0.name):\(RelayConfiguration.redaction)\($0.scope == .admin ? ":admin" : "")" },
            parse: ConfigValueParser.apiKey),
        // One `name:token[:scope]` a line.
        .secretFile("api-key-file", \.apiKeyFile) { config, values throws(ConfigValueError) in
            config.apiKeys = try values.map { v throws(ConfigValueError) in try ConfigValueParser.apiKey(v) }
        },
        .integer("credential-ttl", seconds, \.credentialTTL),
        .integer("credential-max-ttl", seconds, \.credentialMaxTTL),
        .list("advertised-uri", .uri, \.advertisedURIs, parse: ConfigValueParser.uri),
        .integer("api-rate-limit", 0...1_000_000, \.apiRateLimit),
        .flag("api-tls", \.apiTLS).needsRestart(),
        .string("api-cert", \.apiCert),
        .string("api-pkey", \.apiPkey),
        ConfigKey(
            "log-format", .logFormat, field: ConfigField(\.logFormat) { [$0.rawValue] },
            support: .implemented { config, text throws(ConfigValueError) in
                config.logFormat = try ConfigValueParser.logFormat(text)
            }
        ).needsRestart(),
        ConfigKey(
            "log-level", .logLevel, field: ConfigField(\.minimumLogLevel) { [$0.rawValue] },
            support: .implemented { config, text throws(ConfigValueError) in
                config.minimumLogLevel = try ConfigValueParser.logLevel(text)
            }),
        .integer("drain-timeout", 0...Int(Int32.max), \.drainTimeout),
        .integer("max-permissions-per-allocation", positiveCount, \.maxPermissionsPerAllocation),
        .integer("max-tcp-relay-connections", positiveCount, \.maxTCPRelayConnections),
        .integer("unauth-rate-limit", 0...Int(Int32.max), \.unauthRateLimit),
        .integer("unauth-rate-burst", positiveCount, \.unauthRateBurst),
        .integer("auth-failure-rate-limit", 0...Int(Int32.max), \.authFailureRateLimit),
        .integer("allocate-rate-limit", 0...Int(Int32.max), \.allocateRateLimit),
        .integer("tcp-idle-timeout", seconds, \.tcpIdleTimeout).needsRestart(),
        .integer("tls-handshake-timeout", seconds, \.tlsHandshakeTimeout).needsRestart(),
        .integer("cert-check-interval", 0...86400, \.certCheckInterval).needsRestart(),
        .integer("max-connections-per-ip", 0...Int(Int32.max), \.maxConnectionsPerIP),
        .integer("max-pending-connections-per-ip", 0...Int(Int32.max), \.maxPendingConnectionsPerIP),
        .integer("max-pending-connections", positiveCount, \.maxPendingConnections),
        .integer("max-connections", positiveCount, \.maxConnections),
        ConfigKey(
            "kernel-offload", .offloadMode, arity: .optional, field: ConfigField(\.kernelOffload) { [$0.rawValue] },
            support: .implemented { config, text throws(ConfigValueError) in
                config.kernelOffload = try ConfigValueParser.kernelOffload(text)
            }
        ).needsRestart(),
        .string("kernel-offload-object", \.kernelOffloadObject).needsRestart(),
        .list("kernel-offload-interface", .string(maxLength: 15), \.kernelOffloadInterfaces) {
            text throws(ConfigValueError) in try ConfigValueParser.string(text, maxLength: 15)
        }.needsRestart(),
        .flag("kernel-offload-xdp", \.kernelOffloadXDP).needsRestart(),
    ]

    private static let cluster: [ConfigKey] = [
        // The password in `cluster-redis`'s place (the URL then carries none).
        .secretFile("cluster-redis-password-file", \.clusterRedisPasswordFile, single: true) {
            config, values throws(ConfigValueError) in config.clusterRedisPassword = values[0]
        }.needsRestart(),
        ConfigKey(
            "cluster-redis", .redisURL, secret: true, field: .optional(\.clusterRedis),
            support: .implemented { config, text throws(ConfigValueError) in
                guard let text, let endpoint = RedisEndpoint.parseURL(text) else {
                    throw ConfigValueError(expected: RedisEndpoint.expectedURL, missing: text == nil)
                }
                config.clusterRedis = endpoint
            }
        ).needsRestart(),
        // coturn's user database in Redis (docs/userdb.md): coturn's connection string or a URL.
        ConfigKey(
            "redis-userdb", .redisStatsDB, secret: true, field: .optional(\.redisUserDatabase, secret: true),
            support: .implemented { config, text throws(ConfigValueError) in
                guard let text, let endpoint = RedisEndpoint.parseURL(text) ?? RedisEndpoint.parseStatsDB(text) else {
                    throw ConfigValueError(expected: RedisEndpoint.expectedStatsDB, missing: text == nil)
                }
                config.redisUserDatabase = endpoint
            }
        ).needsRestart(),
        // coturn's statistics database names the same Redis; no `field`: `cluster-redis` shows it.
        ConfigKey(
            "redis-statsdb", .redisStatsDB, secret: true,
            support: .implemented { config, text throws(ConfigValueError) in
                guard let text, let endpoint = RedisEndpoint.parseStatsDB(text) else {
                    throw ConfigValueError(expected: RedisEndpoint.expectedStatsDB, missing: text == nil)
                }
                config.clusterRedis = endpoint
            }
        ).needsRestart(),
        ConfigKey(
            "node-name", .string(maxLength: 64), field: .optional(\.nodeName),
            support: .implemented { config, text throws(ConfigValueError) in
                let name = try ConfigValueParser.string(text, maxLength: 64)
                guard NodeLabel.isToken(name) else {
                    throw ConfigValueError(expected: "a name of letters, digits, '-', '_', '.' and '/'")
                }
                config.nodeName = name
            }
        ).needsRestart(),
        ConfigKey(
            "node-labels", .labels, field: .list(\.nodeLabels) { $0.description },
            support: .implemented { config, text throws(ConfigValueError) in
                guard let text, let labels = NodeLabel.parseList(text) else {
                    throw ConfigValueError(expected: ConfigValueType.labels.expected, missing: text == nil)
                }
                config.nodeLabels = labels
            }
        ).needsRestart(),
        .integer("cluster-total-quota", count, \.clusterTotalQuota),
        .integer("cluster-node-ttl", 2...300, \.clusterNodeTTL).needsRestart(),
    ]
}
