import Relay
import Testing

/// Each config key is described once, in `ConfigKeyTable`: the summary `check-config` prints and
/// the settings a reload cannot change are derived from it.
@Suite struct ConfigKeyDescriptionTests {
    @Test("Every setting appears in the summary under its key, aliases and no-ops do not")
    func summaryKeys() {
        #expect(Set(RelayConfiguration.summaryKeys) == Set([
            "listening-port", "tls-listening-port", "alt-listening-port", "alt-tls-listening-port", "listening-ip",
            "no-udp", "no-tcp", "no-tls", "relay-ip", "external-ip", "min-port", "max-port", "relay-threads",
            "realm", "use-auth-secret", "static-auth-secret", "rest-api-separator", "lt-cred-mech", "user",
            "no-auth", "password-algorithms", "stale-nonce", "user-quota", "total-quota", "max-allocate-lifetime", "channel-lifetime",
            "permission-lifetime", "max-bps", "bps-capacity", "denied-peer-ip", "allowed-peer-ip",
            "allow-loopback-peers", "no-multicast-peers", "cert", "pkey", "pkey-pwd", "cipher-list", "ec-curve-name", "no-tlsv1",
            "no-tlsv1_1", "no-tlsv1_2", "tls-openssl-records", "fingerprint", "mobility", "software-attribute", "stun-only", "no-stun", "rfc5780", "no-rfc5780",
            "rfc3489-compatibility", "stun-backward-compatibility",
            "alternate-server", "prometheus", "prometheus-port", "prometheus-address", "log-file", "syslog",
            "simple-log", "verbose", "pidfile", "state-dir", "userdb", "psql-userdb", "redis-userdb", "api-listening-ip", "api-listening-port", "api-key",
            "credential-ttl", "credential-max-ttl", "advertised-uri", "log-format", "log-level", "drain-timeout",
            "max-permissions-per-allocation", "max-tcp-relay-connections", "no-tcp-relay", "no-dtls", "unauth-rate-limit",
            "unauth-rate-burst", "auth-failure-rate-limit",
            "allocate-rate-limit", "tcp-idle-timeout", "tls-handshake-timeout", "max-connections-per-ip",
            "max-pending-connections-per-ip", "max-pending-connections", "max-connections", "kernel-offload", "kernel-offload-object",
            "kernel-offload-interface", "kernel-offload-xdp", "cluster-redis", "node-name", "node-labels",
            "cluster-total-quota", "cluster-node-ttl", "api-rate-limit", "api-tls", "api-cert", "api-pkey",
            "tenant", "tls-server-name", "origin", "reserve-allocations", "reserve-bps", "cross-tenant-relay",
            "proxy-protocol-from", "static-auth-secret-file", "api-key-file", "pkey-pwd-file",
            "cluster-redis-password-file", "cert-check-interval",
        ]))
    }

    @Test("The restart-only settings are the keys of sockets, threads and the process")
    func restartOnlyKeys() {
        #expect(Set(RestartOnlySetting.all.map(\.key)) == Set([
            "listening-ip", "listening-port", "alt-listening-port", "tls-listening-port", "alt-tls-listening-port",
            "no-udp", "no-tcp", "no-tls", "relay-ip", "min-port", "max-port", "relay-threads", "api-listening-ip",
            "api-listening-port", "prometheus", "prometheus-port", "prometheus-address", "log-file", "syslog",
            "simple-log", "log-format", "pidfile", "state-dir", "userdb", "psql-userdb", "redis-userdb", "tcp-idle-timeout", "tls-handshake-timeout", "kernel-offload",
            "kernel-offload-object", "kernel-offload-interface", "kernel-offload-xdp", "cluster-redis", "node-name",
            "node-labels", "cluster-node-ttl", "api-tls", "rfc5780", "no-rfc5780", "no-dtls", "proxy-protocol-from",
            "cluster-redis-password-file", "cert-check-interval",
        ]))
    }

    @Test("A reload keeps a restart-only value and names its key; a live one applies")
    func merge() {
        var running = RelayConfiguration()
        running.minPort = 40000
        running.userQuota = 1
        var candidate = running
        candidate.minPort = 41000
        candidate.userQuota = 5
        let (merged, restartNeeded) = RestartOnlySetting.merge(running: running, candidate: candidate)
        #expect(restartNeeded == ["min-port"])
        #expect(merged.minPort == 40000 && merged.userQuota == 5)
    }
}
