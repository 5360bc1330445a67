extension ConfigKeyTable {
    /// coturn keys relayd recognises but does not implement; each use is a warning, never silent.
    static let unimplementedCoturnKeys: [ConfigKey] = withValue + withoutValue

    private static let noUserDB = "relayd reads coturn's SQLite ('userdb'), PostgreSQL ('psql-userdb') and Redis ('redis-userdb') user databases, not this one"
    private static let noDTLS = "relayd serves DTLS on the TLS ports (tls-listening-port, alt-tls-listening-port); no-dtls turns it off"
    private static let noCLI = "relayd has no telnet CLI or web admin"

    private static let withValue: [ConfigKey] =
        [
            "listening-device", "relay-device", "tcp-proxy-port", "sock-buf-size", "server-name",
            "log-min-level", "new-log-timestamp-format", "syslog-facility", "aux-server",
            "tls-alternate-server", "tcp-alternate-server", "udp-alternate-server", "max-allocate-timeout",
            "drain-min-allocations", "CA-file", "dh-file", "proc-user", "proc-group",
            "secret-key-file", "allocation-default-address-family", "acme-redirect", "prometheus-path",
            "prometheus-cert", "prometheus-key", "multiplex-peer-port", "multiplex-peer-max-peers",
            "stateless-nonce-secret", "ne", "secret-ts-exp-time",
        ].map { ConfigKey.unimplemented($0, arity: .required) } + [
            .unimplemented("mysql-userdb", arity: .required, hint: noUserDB),
            .unimplemented("mongo-userdb", arity: .required, hint: noUserDB),
            .unimplemented("cli-ip", arity: .required, hint: noCLI),
            .unimplemented("cli-port", arity: .required, hint: noCLI),
            .unimplemented("cli-password", arity: .required, hint: noCLI),
            .unimplemented("cli-max-output-sessions", arity: .required, hint: noCLI),
            .unimplemented("web-admin-ip", arity: .required, hint: noCLI),
            .unimplemented("web-admin-port", arity: .required, hint: noCLI),
            .unimplemented("dtls-listening-port", arity: .required, hint: noDTLS),
            .unimplemented("cpus", arity: .required, hint: "use 'relay-threads'"),
        ]

    private static let withoutValue: [ConfigKey] =
        [
            "prometheus-username-labels", "prometheus-tls", "no-auth-pings", "no-dynamic-ip-list",
            "no-dynamic-realms", "check-origin-consistency", "no-udp-relay",
            "raw-public-keys", "no-stdout-log", "new-log-timestamp", "udp-self-balance", "secure-stun",
            "server-relay", "dh566", "dh1066", "dh2066", "keep-address-family", "log-binding",
            "response-origin-only-with-rfc5780",
            "no-stun-backward-compatibility", "rfc5766-channel-numbers",
            "respond-http-unsupported", "drop-invalid-packets", "drop-invalid-packets-log", "udp-recvmmsg",
            "udp-recvmmsg-log", "udp-sendmmsg-log", "udp-gso", "include-reason-string", "multiplex-peer", "prod",
        ].map { ConfigKey.unimplemented($0) } + [
            .unimplemented("oauth", hint: "use 'use-auth-secret'"),
            .unimplemented("daemon", hint: "run relayd under a service manager"),
            .unimplemented("dtls", hint: noDTLS),
            .unimplemented("cli", hint: noCLI),
            .unimplemented("web-admin", hint: noCLI),
            .unimplemented("web-admin-listen-on-workers", hint: noCLI),
            .unimplemented(
                "no-loopback-peers", hint: "obsolete; loopback peers are denied unless 'allow-loopback-peers' is set"),
            .unimplemented("unauthorized-ratelimit", hint: "use 'unauth-rate-limit'"),
            .unimplemented("unauthorized-ratelimit-rps", hint: "use 'unauth-rate-limit'"),
            .unimplemented("stateless-nonce", hint: "relayd's nonces are always stateless"),
        ]
}
