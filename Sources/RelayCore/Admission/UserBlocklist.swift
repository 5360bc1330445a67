import Synchronization

/// Users an operator refused new allocations to, each until a unix time (the admin API's
/// `POST /api/v1/users/{user}/block`, docs/admin.md). Shared by every loop thread and the main
/// thread; it lives as long as the server, so a reload (SIGHUP) keeps it. An Allocate of a
/// blocked user gets 403 (RFC 8656 §7.2: the request is refused on administrative grounds).
/// What keeps blocks beyond the process (`state-dir`, the cluster's Redis) replaces the table
/// with `replace(with:now:)`.
///
/// The Allocate path reads one atomic count first and takes the lock only while some user is
/// blocked, so a server without blocks pays nothing for the check.
public final class UserBlocklist: Sendable {
    /// A blocked user, when the block lapses, and who set it when.
    public struct Entry: Sendable, Hashable {
        public let user: String
        /// Unix time.
        public let until: Int64
        /// The admin API key that set it (its name); empty when not known.
        public let setBy: String
        /// When it was set (unix time); 0 when not known.
        public let setAt: Int64

        public init(user: String, until: Int64, setBy: String = "", setAt: Int64 = 0) {
            self.user = user
            self.until = until
            self.setBy = setBy
            self.setAt = setAt
        }
    }

    private let entries = Locked([String: Entry]())
    private let count = Atomic<Int>(0)
    /// At most this many users at once: an API caller cannot grow the table without bound.
    public static let limit = 100_000

    public init() {}

    /// Blocks `user` until unix time `until` (replacing an earlier block); false when the table
    /// is full.
    @discardableResult
    public func block(_ user: String, until: Int64) -> Bool {
        block(Entry(user: user, until: until))
    }

    /// Sets `entry` (replacing an earlier block of its user); false when the table is full.
    @discardableResult
    public func block(_ entry: Entry) -> Bool {
        entries.withLock { table in
            guard table[entry.user] != nil || table.count < Self.limit else { return false }
            table[entry.user] = entry
            count.store(table.count, ordering: .releasing)
            return true
        }
    }

    /// Sets `entry` unless the table holds exactly it; whether the table changed (false also when
    /// the table is full).
    @discardableResult
    public func update(_ entry: Entry) -> Bool {
        entries.withLock { table in
            guard table[entry.user] != entry, table[entry.user] != nil || table.count < Self.limit else { return false }
            table[entry.user] = entry
            count.store(table.count, ordering: .releasing)
            return true
        }
    }

    /// Makes `entries` the whole table, less those lapsed at `now` and beyond `limit`; whether
    /// anything changed.
    @discardableResult
    public func replace(with entries: [Entry], now: Int64) -> Bool {
        var table: [String: Entry] = [:]
        for entry in entries where entry.until > now && (table[entry.user] != nil || table.count < Self.limit) {
            table[entry.user] = entry
        }
        return self.entries.withLock { current in
            defer { count.store(current.count, ordering: .releasing) }
            guard current != table else { return false }
            current = table
            return true
        }
    }

    /// Lifts `user`'s block; false when there was none.
    @discardableResult
    public func unblock(_ user: String) -> Bool {
        entries.withLock { table in
            let removed = table.removeValue(forKey: user) != nil
            count.store(table.count, ordering: .releasing)
            return removed
        }
    }

    /// Whether `user` may not allocate at unix time `now`; a lapsed block is forgotten here.
    @inline(__always)
    public func isBlocked(_ user: String, now: Int64) -> Bool {
        guard count.load(ordering: .acquiring) > 0 else { return false }
        return entries.withLock { table in
            guard let until = table[user]?.until else { return false }
            if until > now { return true }
            table[user] = nil
            count.store(table.count, ordering: .releasing)
            return false
        }
    }

    /// The blocks still in force at unix time `now`, by user name; lapsed ones are forgotten.
    public func list(now: Int64) -> [Entry] {
        let inForce = entries.withLock { table in
            table = table.filter { $0.value.until > now }
            count.store(table.count, ordering: .releasing)
            return Array(table.values)
        }
        // Sorted outside the lock the loop threads take.
        return inForce.sorted { $0.user < $1.user }
    }
}
