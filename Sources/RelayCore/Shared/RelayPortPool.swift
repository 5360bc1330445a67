import StunCodec

/// The relay ports of the whole node (`min-port`...`max-port` on each relay address), shared by
/// every loop thread (RFC 8656 §7.2: the server picks the relayed transport address).
///
/// One pool for the node, not a slice per loop: the loop that serves a client is chosen by a hash
/// of the client's address, so slices would empty unevenly and refuse an Allocate (508) while
/// another loop's slice still had ports. Taking and releasing a port is control-plane work
/// (Allocate, deletion, sweeps) and happens under one lock; the data path asks the pool only when
/// a packet names one of relayd's own relayed addresses and no table of live allocations already
/// answered (docs/peer-policy.md).
///
/// Each port records what holds it, so the peer policy can tell a live allocation's relayed
/// address from any other socket on the relay's address: a UDP datagram may reach only a port
/// held by a UDP allocation, a TCP connection only one held by a TCP allocation (RFC 6062).
public final class RelayPortPool: Sendable {
    /// What holds a port.
    public enum Holder: UInt8, Sendable {
        case free = 0
        /// Taken by an Allocate whose socket is being opened.
        case opening
        /// The relayed address of a live UDP allocation (RFC 8656).
        case udpAllocation
        /// The relayed address of a live TCP allocation (RFC 6062 §5.1).
        case tcpAllocation
        /// Held by EVEN-PORT's R bit for a later Allocate with RESERVATION-TOKEN (RFC 8656 §18.10).
        case reservation
        /// Bound by another socket of the machine (its bind failed with EADDRINUSE): skipped by
        /// the search until `forgetForeign` frees it again, at most `foreignPortSeconds` later.
        case foreign
    }

    /// How long a port another socket held stays out of the search: it costs one failed bind in
    /// that time instead of one per Allocate that passes it (docs/benchmark.md, "Node capacity").
    public static let foreignPortSeconds: Int64 = 60

    /// The ports of one relay address.
    struct Table {
        var holders: [Holder]
        /// The tenant of each port's allocation (docs/tenants.md); empty until a tenant other
        /// than the default one holds a port.
        var tenants: [UInt16] = []
        var used = 0
        var cursor: Int

        init(count: Int, cursor: Int) {
            holders = Array(repeating: .free, count: count)
            self.cursor = cursor
        }

        /// Frees port index `i` when it is `.foreign`; true when it was.
        mutating func unmarkForeign(_ i: Int) -> Bool {
            guard holders[i] == .foreign else { return false }
            holders[i] = .free
            return true
        }

        /// Frees every `.foreign` port.
        mutating func forgetForeign() {
            for i in holders.indices where holders[i] == .foreign { holders[i] = .free }
        }
    }

    struct State {
        var range: ClosedRange<UInt16>
        var tables: [IPAddress: Table] = [:]
        /// Set when opening a socket failed for want of descriptors or memory; cleared by the
        /// next socket opened, so the condition is logged once per episode.
        var exhausted = false
        /// Another relayd process serves allocations on these addresses: the other side of a
        /// live upgrade (docs/live-upgrade.md).
        var sibling = false
        /// Ports marked `.foreign`, and when they were last freed again.
        var foreign = 0
        var foreignForgotten: Int64 = 0
    }

    private let state: Locked<State>
    private let start: UInt64

    /// `start` places the first search in each address's range (the core passes a number from its
    /// seeded generator, so a seeded run gets the same ports every time).
    public init(range: ClosedRange<UInt16>, addresses: [IPAddress], start: UInt64 = 0) {
        self.start = start
        var initial = State(range: range)
        for ip in addresses where initial.tables[ip] == nil {
            initial.tables[ip] = Table(count: range.count, cursor: Int(start % UInt64(range.count)))
        }
        state = Locked(initial)
    }

    /// After a reload: the new range and relay addresses. Ports held inside both the old and the
    /// new range of an address that stays keep their holder; a live allocation outside the new
    /// range keeps its socket and releases nothing when it ends (`release` ignores the port).
    public func reconfigure(range: ClosedRange<UInt16>, addresses: [IPAddress]) {
        state.withLock { state in
            var fresh: [IPAddress: Table] = [:]
            for ip in addresses where fresh[ip] == nil {
                var table = Table(count: range.count, cursor: Int(start % UInt64(range.count)))
                if let old = state.tables[ip] {
                    for (i, holder) in old.holders.enumerated() where holder != .free && holder != .foreign {
                        let port = Int(state.range.lowerBound) + i
                        guard range.contains(UInt16(port)) else { continue }
                        table.holders[port - Int(range.lowerBound)] = holder
                        table.used += 1
                        if !old.tenants.isEmpty && old.tenants[i] != 0 {
                            if table.tenants.isEmpty { table.tenants = Array(repeating: 0, count: range.count) }
                            table.tenants[port - Int(range.lowerBound)] = old.tenants[i]
                        }
                    }
                }
                fresh[ip] = table
            }
            state.range = range
            state.tables = fresh
            state.foreign = 0
        }
    }

    /// Takes a free port on `ip` and marks it `.opening`: an even one for EVEN-PORT, and with
    /// `pair` (EVEN-PORT's R bit) one whose successor is free too, which becomes a
    /// `.reservation` (RFC 8656 §7.2). The search goes on from where the last one ended, so a
    /// port given back because another process held it is tried again only after the others.
    /// Nil when no such port is free on `ip`.
    func take(on ip: IPAddress, even: Bool, pair: Bool) -> UInt16? {
        state.withLock { state in
            guard state.tables[ip] != nil else { return nil }
            // In place (`!` on the dictionary's slot): a copy of the table taken out and put
            // back would copy its whole `holders` array, one byte a port, on every Allocate.
            return Self.take(in: &state.tables[ip]!, lowest: Int(state.range.lowerBound), even: even, pair: pair)
        }
    }

    private static func take(in table: inout Table, lowest: Int, even: Bool, pair: Bool) -> UInt16? {
        let n = table.holders.count
        for step in 0..<n {
            let i = (table.cursor + step) % n
            let port = lowest + i
            if table.holders[i] != .free { continue }
            if even && port % 2 != 0 { continue }
            if pair && (i + 1 >= n || table.holders[i + 1] != .free) { continue }
            table.holders[i] = .opening
            table.used += 1
            if pair {
                table.holders[i + 1] = .reservation
                table.used += 1
            }
            table.cursor = (i + (pair ? 2 : 1)) % n
            return UInt16(port)
        }
        return nil
    }

    /// Marks a taken port with its holder once its socket is open (or a reserved port handed to
    /// the Allocate that presented the token). False when the port is not in the pool.
    @discardableResult
    public func mark(_ port: UInt16, on ip: IPAddress, as holder: Holder) -> Bool {
        state.withLock { state in
            guard state.range.contains(port), state.tables[ip] != nil else { return false }
            let i = Int(port - state.range.lowerBound)
            if state.tables[ip]!.unmarkForeign(i) { state.foreign -= 1 }
            if state.tables[ip]!.holders[i] == .free, holder != .free { state.tables[ip]!.used += 1 }
            state.tables[ip]!.holders[i] = holder
            if holder == .udpAllocation || holder == .tcpAllocation { state.exhausted = false }
            return true
        }
    }

    /// Takes `port` on `ip` for `holder` when it is free: the port of a socket opened elsewhere
    /// (an adopted allocation). False when it is outside the pool or held already.
    public func claim(_ port: UInt16, on ip: IPAddress, as holder: Holder) -> Bool {
        state.withLock { state in
            guard state.range.contains(port), state.tables[ip] != nil else { return false }
            let i = Int(port - state.range.lowerBound)
            // A foreign port's socket may be the one adopted now.
            if state.tables[ip]!.unmarkForeign(i) { state.foreign -= 1 }
            guard state.tables[ip]!.holders[i] == .free else { return false }
            state.tables[ip]!.holders[i] = holder
            state.tables[ip]!.used += 1
            return true
        }
    }

    /// A port taken for an Allocate (or reserved for one, RFC 8656 §7.2) turned out to be bound
    /// by another socket of the machine: it leaves the search (`.foreign`) for up to
    /// `foreignPortSeconds`.
    func markForeign(_ port: UInt16, on ip: IPAddress) {
        state.withLock { state in
            guard state.range.contains(port), state.tables[ip] != nil else { return }
            let i = Int(port - state.range.lowerBound)
            let holder = state.tables[ip]!.holders[i]
            guard holder == .opening || holder == .reservation else { return }
            if !state.tables[ip]!.tenants.isEmpty { state.tables[ip]!.tenants[i] = 0 }
            state.tables[ip]!.holders[i] = .foreign
            state.tables[ip]!.used -= 1
            state.foreign += 1
        }
    }

    /// Puts the `.foreign` ports back in the search once `foreignPortSeconds` have passed since
    /// the last time (any loop's sweep calls it; one of them does the work).
    func forgetForeign(now: Int64) {
        state.withLock { state in
            guard now - state.foreignForgotten >= Self.foreignPortSeconds else { return }
            state.foreignForgotten = now
            guard state.foreign > 0 else { return }
            for ip in state.tables.keys { state.tables[ip]!.forgetForeign() }
            state.foreign = 0
        }
    }

    /// Ports left out of the search because another socket held them (`.foreign`).
    public var foreignCount: Int { state.withLock { $0.foreign } }

    /// The holders counted one by one: ports held (not free, not foreign) and ports foreign. The
    /// fuzzers check them against the running counts (`inUse`, `foreignCount`).
    public func recount() -> (held: Int, foreign: Int) {
        state.withLock { state in
            var held = 0
            var foreign = 0
            for table in state.tables.values {
                for holder in table.holders {
                    if holder == .foreign { foreign += 1 } else if holder != .free { held += 1 }
                }
            }
            return (held, foreign)
        }
    }

    /// Gives a port back (its allocation or reservation ended, or its socket could not be opened).
    func release(_ port: UInt16, on ip: IPAddress) {
        state.withLock { state in
            guard state.range.contains(port), state.tables[ip] != nil else { return }
            let i = Int(port - state.range.lowerBound)
            guard state.tables[ip]!.holders[i] != .free, state.tables[ip]!.holders[i] != .foreign else { return }
            state.tables[ip]!.holders[i] = .free
            if !state.tables[ip]!.tenants.isEmpty { state.tables[ip]!.tenants[i] = 0 }
            state.tables[ip]!.used -= 1
        }
    }

    /// The tenant `tenant(holding:on:by:)` answers for a port the other side of a live upgrade
    /// may hold: not known to this process.
    public static let unknownTenant = UInt16.max

    /// Records which tenant's allocation holds `port` on `ip` (docs/tenants.md), so a peer
    /// check can tell two tenants' relayed addresses apart; `release` forgets it.
    public func setTenant(_ tenant: Int, of port: UInt16, on ip: IPAddress) {
        state.withLock { state in
            guard state.range.contains(port), state.tables[ip] != nil else { return }
            let i = Int(port - state.range.lowerBound)
            if state.tables[ip]!.tenants.isEmpty {
                guard tenant != 0 else { return }
                state.tables[ip]!.tenants = Array(repeating: 0, count: state.tables[ip]!.holders.count)
            }
            state.tables[ip]!.tenants[i] = UInt16(clamping: tenant)
        }
    }

    /// The tenant of the live allocation of the given kind that holds `port` on relay address
    /// `ip` (bound form); nil when none holds it, `unknownTenant` when the other side of a live
    /// upgrade may.
    public func tenant(holding port: UInt16, on ip: IPAddress, by holder: Holder) -> UInt16? {
        state.withLock { state in
            guard state.range.contains(port), let table = state.tables[ip] else { return nil }
            let i = Int(port - state.range.lowerBound)
            guard table.holders[i] == holder else { return state.sibling ? Self.unknownTenant : nil }
            return table.tenants.isEmpty ? 0 : table.tenants[i]
        }
    }

    /// While another relayd process of this node serves allocations on the same relay
    /// addresses (a live upgrade's two sides, docs/live-upgrade.md), every port of the range
    /// counts as held for `isHeld`: a relayed address of the other process is a live one, and
    /// the peer policy lets packets through to it.
    public func setSibling(_ on: Bool) {
        state.withLock { $0.sibling = on }
    }

    /// Whether `port` on relay address `ip` (bound form) is held by a live allocation of the
    /// given kind: the only ports of relayd's own relayed addresses a peer may be
    /// (docs/peer-policy.md).
    public func isHeld(_ port: UInt16, on ip: IPAddress, by holder: Holder) -> Bool {
        state.withLock { state in
            guard state.range.contains(port), let table = state.tables[ip] else { return false }
            // The other process's allocations are not in this pool: any port may be one of them.
            if state.sibling { return true }
            return table.holders[Int(port - state.range.lowerBound)] == holder
        }
    }

    /// Notes that a relay socket could not be opened for want of descriptors or memory; true the
    /// first time since a socket was last opened (the caller logs it then).
    func noteExhausted() -> Bool {
        state.withLock { state in
            defer { state.exhausted = true }
            return !state.exhausted
        }
    }

    /// Ports held (sockets, openings and reservations) on every relay address.
    public var inUse: Int { state.withLock { $0.tables.values.reduce(0) { $0 + $1.used } } }

    /// Ports free on every relay address.
    public var free: Int {
        state.withLock { state in state.tables.values.reduce(0) { $0 + $1.holders.count - $1.used } - state.foreign }
    }
}
