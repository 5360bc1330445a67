import StunCodec

/// Caps TCP/TLS connections across every loop thread: in total (`max-connections`), per source
/// IP while they have no allocation yet (`max-pending-connections-per-ip`: what a connection
/// flood holds, since a connection that never allocates is what only abuse produces), and per
/// source IP altogether (`max-connections-per-ip`, off unless set: a whole office reaches
/// `turns:` from one address). SO_REUSEPORT spreads one address's connections over the
/// threads, so the counts are shared; they are touched on accept, on a connection's first
/// allocation and on close, never per packet (docs/rate-limits.md).
final class ConnectionLimiter: Sendable {
    struct Limits: Sendable, Equatable {
        var maxTotal: Int
        /// 0: no cap.
        var maxPerIP: Int
        /// 0: no cap.
        var maxPendingPerIP: Int

        init(configuration c: RelayConfiguration) {
            maxTotal = c.maxConnections
            maxPerIP = c.maxConnectionsPerIP
            maxPendingPerIP = c.maxPendingConnectionsPerIP
        }
    }

    struct Counts: Sendable {
        var total = 0
        var perIP: [IPAddress: Int] = [:]
        /// Connections of each source that have not had an allocation yet.
        var pendingPerIP: [IPAddress: Int] = [:]
        var limits: Limits
    }

    private let counts: SharedState<Counts>

    init(_ limits: Limits) {
        counts = SharedState(Counts(limits: limits))
    }

    /// New limits after a reload: they gate new connections; open ones stay.
    func update(_ limits: Limits) {
        counts.withLock { $0.limits = limits }
    }

    /// Takes a slot for a new (pending) connection from `ip`, or says which limit refuses it.
    func admit(_ ip: IPAddress) -> StreamRefusal? {
        counts.withLock { c in
            if c.total >= c.limits.maxTotal { return .totalLimit }
            let current = c.perIP[ip, default: 0]
            if c.limits.maxPerIP > 0 && current >= c.limits.maxPerIP { return .perIPLimit }
            let pending = c.pendingPerIP[ip, default: 0]
            if c.limits.maxPendingPerIP > 0 && pending >= c.limits.maxPendingPerIP { return .pendingPerIPLimit }
            c.total += 1
            c.perIP[ip] = current + 1
            c.pendingPerIP[ip] = pending + 1
            return nil
        }
    }

    /// A connection from `ip` got its first allocation: it no longer counts as pending.
    func allocated(_ ip: IPAddress) {
        counts.withLock { Self.decrement(&$0.pendingPerIP, ip) }
    }

    /// Gives back the slot of a closed connection from `ip` (`pending`: it never allocated).
    func release(_ ip: IPAddress, pending: Bool) {
        counts.withLock { c in
            c.total -= 1
            Self.decrement(&c.perIP, ip)
            if pending { Self.decrement(&c.pendingPerIP, ip) }
        }
    }

    private static func decrement(_ table: inout [IPAddress: Int], _ ip: IPAddress) {
        let remaining = table[ip, default: 1] - 1
        table[ip] = remaining > 0 ? remaining : nil
    }

    /// Connections open now, all threads together.
    var total: Int { counts.value.total }
}
