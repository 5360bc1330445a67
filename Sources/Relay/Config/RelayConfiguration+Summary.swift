extension RelayConfiguration {
    /// What stands in for a secret in summaries.
    public static let redaction = "***"

    /// The effective configuration as `(key, value)` pairs under coturn's key names, one pair
    /// per list element, unset optional values left out. Secrets, passwords, keys and API
    /// tokens appear as `***`, so the result is safe to log.
    public func redactedSummary() -> [(key: String, value: String)] {
        var summary: [(key: String, value: String)] = []
        func add(_ key: String, _ value: some CustomStringConvertible) { summary.append((key, value.description)) }
        func add(_ key: String, _ value: (some CustomStringConvertible)?) {
            if let value { add(key, value) }
        }
        func add(_ key: String, each values: [some CustomStringConvertible]) {
            for value in values { add(key, value) }
        }
        let secret = Self.redaction

        add("listening-port", listeningPort)
        add("tls-listening-port", tlsListeningPort)
        add("alt-listening-port", altListeningPort)
        add("alt-tls-listening-port", altTLSListeningPort)
        add("listening-ip", each: listeningIPs)
        add("no-udp", noUDP)
        add("no-tcp", noTCP)
        add("no-tls", noTLS)

        add("relay-ip", each: relayIPs)
        add("external-ip", each: externalIPs)
        add("min-port", minPort)
        add("max-port", maxPort)
        add("relay-threads", relayThreads)

        add("realm", realm)
        add("use-auth-secret", useAuthSecret)
        add("static-auth-secret", each: staticAuthSecrets.map { _ in secret })
        add("rest-api-separator", restAPISeparator)
        add("lt-cred-mech", ltCredMech)
        add("user", each: users.map { "\($0.name):\(secret)" })
        add("no-auth", noAuth)
        add("stale-nonce", staleNonce)

        add("user-quota", userQuota)
        add("total-quota", totalQuota)
        add("max-allocate-lifetime", maxAllocateLifetime)
        add("channel-lifetime", channelLifetime)
        add("permission-lifetime", permissionLifetime)
        add("max-bps", maxBPS)
        add("bps-capacity", bpsCapacity)

        add("denied-peer-ip", each: deniedPeerIPs)
        add("allowed-peer-ip", each: allowedPeerIPs)
        add("allow-loopback-peers", allowLoopbackPeers)
        add("no-multicast-peers", noMulticastPeers)

        add("cert", cert)
        add("pkey", pkey)
        add("pkey-pwd", pkeyPassword.map { _ in secret })
        add("cipher-list", cipherList)
        add("no-tlsv1", noTLSv1)
        add("no-tlsv1_1", noTLSv1_1)
        add("no-tlsv1_2", noTLSv1_2)

        add("fingerprint", fingerprint)
        add("software-attribute", softwareAttribute)
        add("stun-only", stunOnly)
        add("no-stun", noStun)
        add("alternate-server", each: alternateServers)

        add("prometheus", prometheus)
        add("prometheus-port", prometheusPort)
        add("prometheus-address", prometheusAddress)

        add("log-file", logFile)
        add("syslog", syslog)
        add("simple-log", simpleLog)
        add("verbose", verbose)
        add("pidfile", pidfile)

        add("api-listening-ip", apiListeningIP)
        add("api-listening-port", apiListeningPort)
        add("api-key", each: apiKeys.map { "\($0.name):\(secret)" })
        add("credential-ttl", credentialTTL)
        add("credential-max-ttl", credentialMaxTTL)
        add("advertised-uri", each: advertisedURIs)
        add("log-format", logFormat.rawValue)
        add("log-level", minimumLogLevel.rawValue)
        add("drain-timeout", drainTimeout)
        add("max-permissions-per-allocation", maxPermissionsPerAllocation)
        add("unauth-rate-limit", unauthRateLimit)
        add("unauth-rate-burst", unauthRateBurst)
        add("auth-failure-rate-limit", authFailureRateLimit)
        add("allocate-rate-limit", allocateRateLimit)
        add("tcp-idle-timeout", tcpIdleTimeout)
        add("tls-handshake-timeout", tlsHandshakeTimeout)
        add("max-connections-per-ip", maxConnectionsPerIP)
        add("max-pending-connections-per-ip", maxPendingConnectionsPerIP)
        add("max-connections", maxConnections)
        return summary
    }
}
