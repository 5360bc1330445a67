import Synchronization

/// Users an operator refused new allocations to, each until a unix time (the admin API's
/// `POST /api/v1/users/{user}/block`, docs/admin.md). Shared by every loop thread and the main
/// thread; it lives as long as the server, so a reload (SIGHUP) keeps it. An Allocate of a
/// blocked user gets 403 (RFC 8656 §7.2: the request is refused on administrative grounds).
///
/// The Allocate path reads one atomic count first and takes the lock only while some user is
/// blocked, so a server without blocks pays nothing for the check.
public final class UserBlocklist: Sendable {
    /// A blocked user and when the block lapses.
    public struct Entry: Sendable, Hashable {
        public let user: String
        /// Unix time.
        public let until: Int64

        public init(user: String, until: Int64) {
            self.user = user
            self.until = until
        }
    }

    private let entries = Locked([String: Int64]())
    private let count = Atomic<Int>(0)
    /// At most this many users at once: an API caller cannot grow the table without bound.
    public static let limit = 100_000

    public init() {}

    /// Blocks `user` until unix time `until` (replacing an earlier block); false when the table
    /// is full.
    @discardableResult
    public func block(_ user: String, until: Int64) -> Bool {
        entries.withLock { table in
            guard table[user] != nil || table.count < Self.limit else { return false }
            table[user] = until
            count.store(table.count, ordering: .releasing)
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
            guard let until = table[user] else { return false }
            if until > now { return true }
            table[user] = nil
            count.store(table.count, ordering: .releasing)
            return false
        }
    }

    /// The blocks still in force at unix time `now`, by user name; lapsed ones are forgotten.
    public func list(now: Int64) -> [Entry] {
        entries.withLock { table in
            table = table.filter { $0.value > now }
            count.store(table.count, ordering: .releasing)
            return table.map { Entry(user: $0.key, until: $0.value) }.sorted { $0.user < $1.user }
        }
    }
}
