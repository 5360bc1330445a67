import StunCodec

/// Caps concurrent TCP/TLS connections per source IP (`max-connections-per-ip`, off unless set:
/// a whole office reaches `turns:` from one address) and in total (`max-connections`) across
/// every loop thread. SO_REUSEPORT spreads one address's connections
/// over the threads, so the count is shared; it is touched on accept and close only, never per packet.
final class ConnectionLimiter: Sendable {
    struct Counts: Sendable {
        var total = 0
        var perIP: [IPAddress: Int] = [:]
        var maxTotal: Int
        var maxPerIP: Int
    }

    private let counts: SharedState<Counts>

    init(maxTotal: Int, maxPerIP: Int) {
        counts = SharedState(Counts(maxTotal: maxTotal, maxPerIP: maxPerIP))
    }

    /// New limits after a reload: they gate new connections; open ones stay.
    func update(maxTotal: Int, maxPerIP: Int) {
        counts.withLock {
            $0.maxTotal = maxTotal
            $0.maxPerIP = maxPerIP
        }
    }

    /// Takes a slot for a connection from `ip`, or says which limit refuses it.
    func admit(_ ip: IPAddress) -> StreamRefusal? {
        counts.withLock { c in
            if c.total >= c.maxTotal { return .totalLimit }
            let current = c.perIP[ip, default: 0]
            if c.maxPerIP > 0 && current >= c.maxPerIP { return .perIPLimit }
            c.total += 1
            c.perIP[ip] = current + 1
            return nil
        }
    }

    /// Gives back the slot of a closed connection from `ip`.
    func release(_ ip: IPAddress) {
        counts.withLock { c in
            c.total -= 1
            let remaining = c.perIP[ip, default: 1] - 1
            c.perIP[ip] = remaining > 0 ? remaining : nil
        }
    }

    /// Connections open now, all threads together.
    var total: Int { counts.value.total }
}
