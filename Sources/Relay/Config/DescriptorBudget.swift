import Glibc

/// How many descriptors a configuration can hold at once, against the process's limit
/// (docs/configuration.md, "Check a file before using it"). Every allocation holds a relay
/// socket on one relay address (two for a dual-stack allocation, RFC 8656 §7.2); every TCP or
/// TLS client, and every DTLS session, holds its connection (at most `max-connections`); every
/// RFC 6062 pipe holds two
/// more (its data connection and the peer's), at most `max-tcp-relay-connections` each
/// allocation, and is not counted here. Listeners, the API, logs and libevent take a few dozen.
public struct DescriptorBudget: Sendable, Equatable {
    /// Ports in the relay range, and relay addresses.
    public var ports: Int
    public var relayAddresses: Int
    /// The relay sockets the range and `total-quota` allow together.
    public var relaySockets: Int
    /// TCP and TLS client connections (`max-connections`); 0 without TCP and TLS listeners.
    public var connections: Int
    /// Listeners, the API, logs, event loops.
    public var fixed: Int
    /// The process's hard limit (`RLIMIT_NOFILE`), which `relayd serve` raises its soft one to.
    public var limit: Int

    public var total: Int { relaySockets + connections + fixed }
    public var fits: Bool { total <= limit }

    /// `c` with its addresses resolved (`resolvingAddresses(interfaces:)`), so `relay-ip` is set.
    public init(configuration c: RelayConfiguration, limit: Int = DescriptorBudget.currentLimit()) {
        ports = Int(c.maxPort) - Int(c.minPort) + 1
        relayAddresses = max(1, c.relayIPs.count)
        var sockets = ports * relayAddresses
        // A dual-stack allocation holds one socket of each family.
        if c.totalQuota > 0 { sockets = min(sockets, c.totalQuota * min(2, relayAddresses)) }
        relaySockets = sockets
        let streams = !(c.noTCP && c.noTLS)
        // DTLS sessions hold a connected socket each and count against max-connections too.
        let dtls = !c.noDTLS && c.cert != nil
        connections = streams || dtls ? c.maxConnections : 0
        let threads = c.relayThreads ?? Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        let listeners = max(1, c.listeningIPs.count) * (c.noUDP ? 0 : 2) + (streams ? 4 : 0)
        fixed = 64 + listeners * max(1, threads) + 4 * max(1, threads)
        self.limit = limit
    }

    /// The hard `RLIMIT_NOFILE` of this process: `relayd serve` raises its soft limit to it
    /// (`raiseSoftLimit()`).
    public static func currentLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        return limit.rlim_max >= rlim_t(Int.max) ? Int.max : Int(limit.rlim_max)
    }

    /// Raises the soft descriptor limit to the hard one, as servers holding a socket per client
    /// do; the hard limit is the operator's (LimitNOFILE=, limits.conf).
    public static func raiseSoftLimit() {
        var limit = rlimit()
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(resource, &limit)
    }

    /// One line for `check-config`.
    public var summary: String {
        let quota = relaySockets < ports * relayAddresses ? " under total-quota" : ""
        let parts =
            "\(relaySockets) relay sockets (\(ports) ports x \(relayAddresses) relay addresses\(quota))"
            + (connections > 0 ? " + \(connections) TCP/TLS clients (max-connections)" : "")
            + " + \(fixed) for listeners and the process = \(total), not counting RFC 6062 pipes (2 each)"
        let verdict = fits ? "fits" : "does NOT fit"
        return "descriptors: up to \(parts); the limit here is \(limit) (ulimit -Hn; under systemd the unit's "
            + "LimitNOFILE applies): \(verdict)"
    }

    /// The warning when the configuration can hold more descriptors than the limit allows.
    public var warning: String? {
        guard !fits else { return nil }
        return "the configuration can hold \(total) descriptors but the limit here is \(limit): allocations and "
            + "connections past it fail; raise the limit (LimitNOFILE=, ulimit -Hn) or narrow min-port..max-port, "
            + "total-quota or max-connections"
    }
}
