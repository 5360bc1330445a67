import StunCodec

/// Where each key was set, in order: one source per use (so per element of a list).
typealias ConfigSources = [String: [ConfigSource]]

extension ConfigSources {
    /// Where `key` was last set.
    func last(_ key: String) -> ConfigSource? { self[key]?.last }

    /// Where element `index` of the list key `key` was set.
    func element(_ key: String, _ index: Int) -> ConfigSource? {
        guard let list = self[key], list.indices.contains(index) else { return nil }
        return list[index]
    }
}

/// Rules that span keys, checked once the file and command line are merged.
enum ConfigValidator {
    /// Throws for contradictions, appends warnings for settings that work but look wrong, and
    /// fills in what is implied (static users alone imply `lt-cred-mech`).
    static func validate(
        _ config: inout RelayConfiguration, sources: ConfigSources, warnings: inout [String]
    ) throws(ConfigError) {
        try checkSecretFiles(&config, sources: sources)
        try checkPorts(config, sources: sources)
        try checkAuthentication(&config, sources: sources, warnings: &warnings)
        try checkPlaceholderSecret(config, sources: sources, warnings: &warnings)
        try checkServices(config, sources: sources)
        try checkUniqueness(config, sources: sources)
        try checkTLSSettings(config, sources: sources)
    }

    /// A secret is given in one place: the key or its file (docs/configuration.md, "Secrets in
    /// files"). The Redis password file replaces the URL's password.
    private static func checkSecretFiles(_ config: inout RelayConfiguration, sources: ConfigSources) throws(ConfigError) {
        for (key, file) in [
            ("static-auth-secret", "static-auth-secret-file"), ("api-key", "api-key-file"), ("pkey-pwd", "pkey-pwd-file"),
        ] where sources.last(key) != nil && sources.last(file) != nil {
            throw .conflict("\(key) and \(file) both set: give the secret in one place", key: file, at: sources.last(file))
        }
        guard let password = config.clusterRedisPassword else { return }
        guard config.clusterRedis != nil else {
            throw .conflict(
                "cluster-redis-password-file is set without cluster-redis", key: "cluster-redis-password-file",
                at: sources.last("cluster-redis-password-file"))
        }
        if config.clusterRedis?.password != nil {
            throw .conflict(
                "cluster-redis has a password and cluster-redis-password-file is set: give it in one place",
                key: "cluster-redis-password-file", at: sources.last("cluster-redis-password-file"))
        }
        config.clusterRedis?.password = password
    }

    private static func checkPorts(_ config: RelayConfiguration, sources: ConfigSources) throws(ConfigError) {
        if config.minPort > config.maxPort {
            let key = sources.last("max-port") != nil ? "max-port" : "min-port"
            throw .conflict(
                "min-port \(config.minPort) is greater than max-port \(config.maxPort)", key: key, at: sources.last(key)
            )
        }
        // rfc5780's second port (listening-port + 1 unless alt-listening-port says otherwise)
        // must be free of the server's other ports and of the relay range.
        if config.rfc5780Active, config.altListeningPort == nil, config.listeningPort < UInt16.max {
            let alt = config.listeningPort + 1
            var taken = [
                ("tls-listening-port", config.tlsListeningPort), ("api-listening-port", config.apiListeningPort),
            ]
            if config.prometheus { taken.append(("prometheus-port", config.prometheusPort)) }
            let clash = taken.first { $0.1 == alt }?.0
                ?? ((config.minPort...config.maxPort).contains(alt) ? "min-port..max-port" : nil)
            if let clash {
                throw .conflict(
                    "the second listening port \(alt) (listening-port + 1) is taken by \(clash); set alt-listening-port",
                    key: "rfc5780", at: sources.last("rfc5780"))
            }
        }
        if config.credentialTTL > config.credentialMaxTTL {
            let key = sources.last("credential-ttl") != nil ? "credential-ttl" : "credential-max-ttl"
            throw .conflict(
                "credential-ttl \(config.credentialTTL) is greater than credential-max-ttl \(config.credentialMaxTTL)",
                key: key, at: sources.last(key))
        }
    }

    private static func checkAuthentication(
        _ config: inout RelayConfiguration, sources: ConfigSources, warnings: inout [String]
    ) throws(ConfigError) {
        // With coturn's user database, users and REST secrets may all come from it (docs/userdb.md).
        let databases = [
            ("userdb", config.userDatabase != nil), ("psql-userdb", config.postgresUserDatabase != nil),
            ("redis-userdb", config.redisUserDatabase != nil),
        ].filter(\.1).map(\.0)
        let database = !databases.isEmpty
        if databases.count > 1 {
            let key = ["redis-userdb", "psql-userdb", "sql-userdb", "userdb", "db"].first { sources.last($0) != nil } ?? databases[1]
            throw .conflict(
                "cannot be combined with '\(databases.first { $0 != key } ?? databases[0])': relayd reads one user database",
                key: key, at: sources.last(key))
        }
        if config.useAuthSecret, config.staticAuthSecrets.isEmpty, !database {
            throw .conflict(
                "needs at least one 'static-auth-secret'", key: "use-auth-secret", at: sources.last("use-auth-secret"))
        }
        if config.noAuth, let first = sources.last("tenant") {
            // Without credentials a client would pick its tenant by ORIGIN or server name.
            throw .conflict("tenants need credentials; 'no-auth' cannot be combined with 'tenant'", key: "no-auth", at: first)
        }
        if config.noAuth, config.ltCredMech || config.useAuthSecret {
            let other = config.useAuthSecret ? "use-auth-secret" : "lt-cred-mech"
            throw .conflict("cannot be combined with '\(other)'", key: "no-auth", at: sources.last("no-auth"))
        }
        // Tenants bring their own credentials (docs/tenants.md): the default tenant may have none.
        let tenants = !config.tenantFiles.isEmpty
        if !config.noAuth, !config.ltCredMech, !config.useAuthSecret {
            guard !config.users.isEmpty || database || tenants else {
                throw .conflict(
                    "no authentication mode: set 'lt-cred-mech' with 'user' entries, "
                        + "'use-auth-secret' with 'static-auth-secret', or 'no-auth'", key: nil, at: nil)
            }
            config.ltCredMech = true
        }
        if config.ltCredMech, !config.useAuthSecret, config.users.isEmpty, !database, !tenants {
            warnings.append(
                warning(
                    sources.last("lt-cred-mech"), key: "lt-cred-mech",
                    "no 'user' entries, so no request can authenticate"))
        }
        if config.noAuth, !config.users.isEmpty {
            warnings.append(warning(sources.last("user"), key: "user", "ignored because 'no-auth' is set"))
        }
    }

    /// The secret `conf/relayd.conf` ships with is public: anyone can mint credentials with it.
    /// On loopback (where the shipped file listens) it is a warning; beyond loopback, an error.
    private static func checkPlaceholderSecret(
        _ config: RelayConfiguration, sources: ConfigSources, warnings: inout [String]
    ) throws(ConfigError) {
        guard config.useAuthSecret,
            let index = config.staticAuthSecrets.firstIndex(of: RelayConfiguration.placeholderAuthSecret)
        else { return }
        let source = sources.element("static-auth-secret", index) ?? sources.last("static-auth-secret-file")
        let key = sources.last("static-auth-secret-file") != nil ? "static-auth-secret-file" : "static-auth-secret"
        let advice = "set your own (for example the output of 'openssl rand -hex 32') and give your credential backend the same"
        if let listener = ConfigAdvisor.nonLoopbackListener(config) {
            throw .conflict(
                "is the placeholder shipped in conf/relayd.conf, refused while listening on \(listener): anyone could "
                    + "mint credentials; \(advice)", key: key, at: source)
        }
        warnings.append(
            warning(
                source, key: key,
                "is the placeholder shipped in conf/relayd.conf: anyone could mint credentials; fine on loopback, "
                    + "refused on any other listener; \(advice)"))
    }

    private static func checkServices(_ config: RelayConfiguration, sources: ConfigSources) throws(ConfigError) {
        if config.stunOnly, config.noStun {
            throw .conflict("cannot be combined with 'no-stun'", key: "stun-only", at: sources.last("stun-only"))
        }
        if config.noUDP, config.noTCP, config.noTLS {
            throw .conflict("'no-udp', 'no-tcp' and 'no-tls' together leave no listener", key: nil, at: nil)
        }
        for family in [IPAddress.Family.ipv4, .ipv6] {
            let unmapped = config.externalIPs.indices.filter {
                config.externalIPs[$0].publicIP.family == family && config.externalIPs[$0].privateIP == nil
            }
            if unmapped.count > 1 {
                throw .conflict(
                    "several \(family == .ipv4 ? "IPv4" : "IPv6") entries without a private address; use 'public/private'",
                    key: "external-ip", at: sources.element("external-ip", unmapped[1]))
            }
        }
    }

    private static func checkUniqueness(_ config: RelayConfiguration, sources: ConfigSources)
        throws(ConfigError)
    {
        if let index = firstDuplicate(config.users.map(\.name)) {
            throw .conflict(
                "user '\(config.users[index].name)' is defined twice", key: "user", at: sources.element("user", index))
        }
        if let index = firstDuplicate(config.apiKeys.map(\.name)) {
            throw .conflict(
                "API key name '\(config.apiKeys[index].name)' is defined twice",
                key: sources.last("api-key-file") != nil ? "api-key-file" : "api-key",
                at: sources.element("api-key", index) ?? sources.last("api-key-file"))
        }
    }

    /// `source: key 'key': message`, like `ConfigError`'s descriptions.
    private static func warning(_ source: ConfigSource?, key: String, _ message: String) -> String {
        (source.map { "\($0): " } ?? "") + "key '\(key)': \(message)"
    }

    /// The index of the first name that repeats an earlier one.
    private static func firstDuplicate(_ names: [String]) -> Int? {
        var seen: Set<String> = []
        return names.firstIndex { !seen.insert($0).inserted }
    }
}
