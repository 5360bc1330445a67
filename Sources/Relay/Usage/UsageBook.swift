import RelayCore

/// Usage per tenant, user and hour (docs/usage.md): what `GET /api/v1/usage` answers from. Loop
/// threads hand it records (`add`); the main thread takes them once a second, writes them to
/// the usage journal and Redis, and applies them (`apply`), so every count here is one a record
/// holds. Bounded: hours older than `retentionHours` are dropped, and past `maxRows` rows a new
/// tenant, user and hour is counted in `droppedRecords` instead.
public final class UsageBook: Sendable {
    /// One row's key.
    public struct Key: Hashable, Sendable {
        public var hour: Int64
        public var tenant: String
        public var user: String
    }

    /// What one user of one tenant did in one hour.
    public struct Counts: Sendable, Equatable {
        public var allocations: UInt64 = 0
        public var unusedAllocations: UInt64 = 0
        public var allocationSeconds: UInt64 = 0
        public var traffic = TrafficCounters()

        public init() {}

        static func += (a: inout Counts, b: Counts) {
            a.allocations &+= b.allocations
            a.unusedAllocations &+= b.unusedAllocations
            a.allocationSeconds &+= b.allocationSeconds
            a.traffic += b.traffic
        }
    }

    private struct State {
        var rows: [Key: Counts] = [:]
        /// Sessions that relayed in a process before the one they end in (a live upgrade): not
        /// unused, whatever the last process saw.
        var relayedBefore: Set<String> = []
        var droppedRecords: UInt64 = 0
        var appliedRecords: UInt64 = 0
        /// The first hour kept (`retentionHours` before the newest seen); older rows go.
        var oldestHour: Int64 = 0
        /// Every tenant's sum since the journal began (or the start, without one).
        var perTenant: [String: Counts] = [:]
    }

    public static let hour: Int64 = 3600
    let retentionHours: Int64
    let maxRows: Int
    /// Records waiting for the main thread at most; past it a loop's record is dropped (counted).
    static let maxPending = 1 << 20
    private let state = Locked(State())
    /// The loops' records for the main thread, under a lock of their own: a loop never waits
    /// for the main thread's work on the rows.
    private let pending = Locked<(records: [UsageRecord], dropped: UInt64)>(([], 0))

    public init(retentionHours: Int64 = 24 * 31, maxRows: Int = 1_000_000) {
        self.retentionHours = max(1, retentionHours)
        self.maxRows = max(1, maxRows)
    }

    /// A loop's record, for the main thread's next `takePending`.
    func add(_ record: UsageRecord) {
        pending.withLock { p in
            guard p.records.count < Self.maxPending else {
                p.dropped &+= 1
                return
            }
            p.records.append(record)
        }
    }

    func takePending() -> [UsageRecord] {
        let (records, dropped) = pending.withLock { p in
            defer { p = ([], 0) }
            return p
        }
        if dropped > 0 { state.withLock { $0.droppedRecords &+= dropped } }
        return records
    }

    /// Puts records back at the head of the queue (a journal write that failed).
    func requeue(_ records: [UsageRecord]) {
        guard !records.isEmpty else { return }
        pending.withLock { p in p.records = Array((records + p.records).prefix(Self.maxPending)) }
    }

    /// Counts `record` in its hour's row.
    func apply(_ record: UsageRecord) {
        state.withLock { s in
            let key = Key(hour: record.time - record.time % Self.hour, tenant: record.tenant, user: record.user)
            // Older than the retention: not kept (a journal read at start holds such records).
            guard key.hour >= s.oldestHour else { return }
            var counts = Counts()
            switch record.kind {
            case .made:
                counts.allocations = 1
            case .ended:
                counts.traffic = record.traffic
                counts.allocationSeconds = UInt64(max(0, record.seconds))
                let relayed = record.traffic.bytesToPeer > 0 || record.traffic.bytesToClient > 0
                if record.final {
                    if !relayed && !s.relayedBefore.contains(record.session) { counts.unusedAllocations = 1 }
                    s.relayedBefore.remove(record.session)
                } else if relayed {
                    s.relayedBefore.insert(record.session)
                }
            }
            guard s.rows[key] != nil || s.rows.count < maxRows else {
                s.droppedRecords &+= 1
                return
            }
            s.rows[key, default: Counts()] += counts
            s.perTenant[record.tenant, default: Counts()] += counts
            s.appliedRecords &+= 1
        }
    }

    /// Drops the hours older than the retention; the rows are walked only when the hour turns.
    func expire(now: Int64) {
        let oldest = now - now % Self.hour - (retentionHours - 1) * Self.hour
        state.withLock { s in
            guard oldest > s.oldestHour else { return }
            s.oldestHour = oldest
            s.rows = s.rows.filter { $0.key.hour >= oldest }
        }
    }

    /// The rows of hours that overlap `from..<to` (unix seconds), of `tenant` (nil: every
    /// tenant) and `user` (nil: every user), in hour, tenant and user order.
    public func rows(tenant: String?, user: String?, from: Int64, to: Int64) -> [(key: Key, counts: Counts)] {
        let first = from - from % Self.hour
        return state.withLock { s in
            s.rows.filter { key, _ in
                key.hour >= first && key.hour < to && (tenant == nil || key.tenant == tenant)
                    && (user == nil || key.user == user)
            }
        }
        .map { (key: $0.key, counts: $0.value) }
        .sorted { ($0.key.hour, $0.key.tenant, $0.key.user) < ($1.key.hour, $1.key.tenant, $1.key.user) }
    }

    /// Every row, for a compacted journal.
    var allRows: [Key: Counts] { state.withLock { $0.rows } }

    /// Rows put back from a compacted journal (docs/usage.md).
    func restore(_ key: Key, _ counts: Counts) {
        state.withLock { s in
            guard key.hour >= s.oldestHour else { return }
            guard s.rows[key] != nil || s.rows.count < maxRows else {
                s.droppedRecords &+= 1
                return
            }
            s.rows[key, default: Counts()] += counts
            s.perTenant[key.tenant, default: Counts()] += counts
        }
    }

    /// Each tenant's sums, "" the default tenant (`/metrics`, docs/usage.md).
    public var tenantTotals: [String: Counts] { state.withLock { $0.perTenant } }

    /// Records applied, and records dropped (a full book or queue).
    public var totals: (applied: UInt64, dropped: UInt64) { state.withLock { ($0.appliedRecords, $0.droppedRecords) } }
}
