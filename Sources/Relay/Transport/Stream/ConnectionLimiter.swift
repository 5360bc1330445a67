import StunCodec

/// Caps TCP/TLS connections and DTLS sessions across every loop thread, with shares that bind
/// only under pressure (docs/rate-limits.md):
///
/// - `max-pending-connections` bounds the node's pending connections (those that have not had an
///   allocation yet: what a handshake flood holds). Below half of it, any source may open
///   more; at or above half, a source may add one only while it holds fewer than its fair share,
///   the bound divided among the sources holding pending connections plus one (room for a
///   newcomer). A company behind one address whose 2,000 `turns:` calls start at once is served;
///   a flood from one address stops at half the bound, and a second address still gets in.
/// - `max-connections` bounds all connections, shared the same way above half of it.
/// - `max-connections-per-ip` and `max-pending-connections-per-ip` are hard caps per source
///   when an operator sets them (0, the default: none).
///
/// SO_REUSEPORT spreads one address's connections over the threads, so the counts are shared;
/// they are touched on accept, on a connection's first allocation, when its allocations end and
/// on close, never per packet.
final class ConnectionLimiter: Sendable {
    struct Limits: Sendable, Equatable {
        var maxTotal: Int
        /// 0: no cap.
        var maxPerIP: Int
        var maxPending: Int
        /// 0: no cap.
        var maxPendingPerIP: Int

        init(maxTotal: Int, maxPerIP: Int = 0, maxPending: Int, maxPendingPerIP: Int = 0) {
            self.maxTotal = maxTotal
            self.maxPerIP = maxPerIP
            self.maxPending = maxPending
            self.maxPendingPerIP = maxPendingPerIP
        }

        init(configuration c: RelayConfiguration) {
            self.init(
                maxTotal: c.maxConnections, maxPerIP: c.maxConnectionsPerIP, maxPending: c.maxPendingConnections,
                maxPendingPerIP: c.maxPendingConnectionsPerIP)
        }
    }

    struct Counts: Sendable {
        var total = 0
        var perIP: [IPAddress: Int] = [:]
        var pending = 0
        /// Connections of each source that have no allocation now.
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
            let current = c.perIP[ip, default: 0]
            let pending = c.pendingPerIP[ip, default: 0]
            if c.total >= c.limits.maxTotal { return .totalLimit }
            if c.limits.maxPerIP > 0 && current >= c.limits.maxPerIP { return .perIPLimit }
            if Self.overShare(current, of: c.limits.maxTotal, used: c.total, sources: c.perIP.count) {
                return .totalShare
            }
            if c.pending >= c.limits.maxPending { return .pendingLimit }
            if c.limits.maxPendingPerIP > 0 && pending >= c.limits.maxPendingPerIP { return .pendingPerIPLimit }
            if Self.overShare(pending, of: c.limits.maxPending, used: c.pending, sources: c.pendingPerIP.count) {
                return .pendingShare
            }
            c.total += 1
            c.perIP[ip] = current + 1
            c.pending += 1
            c.pendingPerIP[ip] = pending + 1
            return nil
        }
    }

    /// Takes a slot of the node's bounds only (`max-connections`, `max-pending-connections`) for
    /// a balancer's connection whose PROXY header has not said whose it is yet: counted against
    /// a source, it would share that source's caps among every client behind the balancer
    /// (docs/tls.md). Nil when taken; else which bound refuses it.
    func admitUnattributed() -> StreamRefusal? {
        counts.withLock { c in
            if c.total >= c.limits.maxTotal { return .totalLimit }
            if c.pending >= c.limits.maxPending { return .pendingLimit }
            c.total += 1
            c.pending += 1
            return nil
        }
    }

    /// Gives back a slot `admitUnattributed` took.
    func releaseUnattributed() {
        counts.withLock { c in
            c.total -= 1
            c.pending -= 1
        }
    }

    /// Whether a source holding `held` of a bound `bound`, of which `used` are taken by
    /// `sources` sources, is at its share: only at or above half of the bound, where each source
    /// may hold the bound divided by the sources plus one.
    static func overShare(_ held: Int, of bound: Int, used: Int, sources: Int) -> Bool {
        guard used * 2 >= bound else { return false }
        return held >= max(1, bound / (sources + 1))
    }

    /// A connection from `ip` got its first allocation: it no longer counts as pending.
    /// Counts a connection a live upgrade handed over, as pending, without refusing it: it is
    /// open already (its allocation, if any, marks it `allocated` when adopted).
    func adopt(_ ip: IPAddress) {
        counts.withLock { c in
            c.total += 1
            c.perIP[ip, default: 0] += 1
            c.pending += 1
            c.pendingPerIP[ip, default: 0] += 1
        }
    }

    func allocated(_ ip: IPAddress) {
        counts.withLock { c in
            c.pending -= 1
            Self.decrement(&c.pendingPerIP, ip)
        }
    }

    /// Every allocation of a connection from `ip` ended while it stays open: it counts as pending
    /// again (and `tcp-idle-timeout` applies to it again).
    func pendingAgain(_ ip: IPAddress) {
        counts.withLock { c in
            c.pending += 1
            c.pendingPerIP[ip, default: 0] += 1
        }
    }

    /// Gives back the slot of a closed connection from `ip` (`pending`: it holds no allocation).
    func release(_ ip: IPAddress, pending: Bool) {
        counts.withLock { c in
            c.total -= 1
            Self.decrement(&c.perIP, ip)
            if pending {
                c.pending -= 1
                Self.decrement(&c.pendingPerIP, ip)
            }
        }
    }

    private static func decrement(_ table: inout [IPAddress: Int], _ ip: IPAddress) {
        let remaining = table[ip, default: 1] - 1
        table[ip] = remaining > 0 ? remaining : nil
    }

    /// Connections open now, all threads together.
    var total: Int { counts.value.total }

    /// Connections without an allocation now, all threads together.
    var pending: Int { counts.value.pending }
}
