import Foundation
import Glibc
import RelayCore
import Synchronization

/// Keeps an in-memory `UserDatabaseView` of coturn's user database up to date, on a thread of
/// its own (docs/userdb.md): it checks every `interval` whether the database changed, reads it
/// whole when it did, and leaves the new view for the main thread to take (`take`). A database
/// that cannot be read leaves the last good view in place: the failure is reported once, until
/// a read succeeds again. Never touched by a loop.
final class UserDatabaseWatcher: Sendable {
    /// What the watcher found since the main thread last looked.
    enum Report: Sendable {
        case view(UserDatabaseView)
        /// A read failed (the first of a run of failures only).
        case failed(String)
    }

    /// What the log names the database by (a file, or PostgreSQL's connection without its password).
    let name: String
    private let open: @Sendable () -> any UserDatabaseSource
    private let interval: Double
    private let pending = Mutex<[Report]>([])
    private let stopped = Atomic<Bool>(false)
    /// Reads that failed, and whether the last one did.
    private let failures = Atomic<UInt64>(0)
    private let failing = Atomic<Bool>(false)
    /// Users in the last view read, all realms.
    private let users = Atomic<Int>(0)
    /// Lookups of users the view lacks (docs/userdb.md), answered on a thread of their own with
    /// a connection of their own, so a long read of the whole database holds none up.
    private let lookups = Mutex<[(UserLookup, @Sendable (LookupResult) -> Void)]>([])
    private let lookupsWaiting = DispatchSemaphore(value: 0)
    /// Signalled by each of the two threads as it ends (`stop` waits for them).
    private let ended = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)
    /// Seconds `stop` waits for the threads (a lookup or read under way finishes first).
    static let stopSeconds = 3.0
    /// Lookups waiting at most; past it a lookup is answered `.failed` at once.
    static let lookupLimit = 1024
    /// After a lookup fails to reach the database, the next second's lookups are answered
    /// `.failed` without trying: a database that is down costs no connect timeout per user.
    static let lookupBackoff = 1.0

    /// What a lookup found.
    enum LookupResult: Sendable {
        case found([UInt8])
        case missing
        case failed
    }

    init(name: String, interval: Double = 1.0, open: @escaping @Sendable () -> any UserDatabaseSource) {
        self.name = name
        self.open = open
        self.interval = interval
    }

    /// The watcher of the database `configuration` names, if any.
    static func configured(_ configuration: RelayConfiguration) -> UserDatabaseWatcher? {
        if let path = configuration.userDatabase {
            return UserDatabaseWatcher(name: path) { SQLiteUserDatabase(path: path) }
        }
        if let conninfo = configuration.postgresUserDatabase {
            return UserDatabaseWatcher(name: "PostgreSQL (\(PostgresUserDatabase.redacted(conninfo)))") {
                PostgresUserDatabase(conninfo: conninfo)
            }
        }
        if let endpoint = configuration.redisUserDatabase {
            return UserDatabaseWatcher(name: "Redis (\(endpoint))") { RedisUserDatabase(endpoint: endpoint) }
        }
        return nil
    }

    /// Starts the threads; the first read happens at once.
    func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        let thread = Thread { [self] in
            defer { ended.signal() }
            run()
        }
        thread.name = "relayd-userdb"
        thread.start()
        let lookupThread = Thread { [self] in
            defer { ended.signal() }
            answerLookups()
        }
        lookupThread.name = "relayd-userdb-lookup"
        lookupThread.start()
    }

    /// Stops the threads and waits for them (bounded): their database connections close before
    /// the process exits, so no library's exit-time cleanup runs under a thread still using it.
    func stop() {
        stopped.store(true, ordering: .relaxed)
        lookupsWaiting.signal()
        guard started.load(ordering: .relaxed) else { return }
        let deadline = DispatchTime.now() + Self.stopSeconds
        for _ in 0..<2 {
            if ended.wait(timeout: deadline) == .timedOut { break }
        }
    }

    /// Asks the database for one user off the loop; `reply` gets the answer on the lookup thread.
    func lookUp(_ lookup: UserLookup, reply: @escaping @Sendable (LookupResult) -> Void) {
        let queued = lookups.withLock { queue -> Bool in
            guard queue.count < Self.lookupLimit else { return false }
            queue.append((lookup, reply))
            return true
        }
        if queued { lookupsWaiting.signal() } else { reply(.failed) }
    }

    private func answerLookups() {
        let database = open()
        var failedAt = Date.distantPast
        while !stopped.load(ordering: .relaxed) {
            lookupsWaiting.wait()
            let asked = lookups.withLock { queue in
                defer { queue = [] }
                return queue
            }
            for (lookup, reply) in asked {
                guard Date().timeIntervalSince(failedAt) >= Self.lookupBackoff else {
                    reply(.failed)
                    continue
                }
                do {
                    let key = try database.md5Key(name: lookup.name, realm: lookup.realm)
                    reply(key.map { .found($0) } ?? .missing)
                } catch {
                    failedAt = Date()
                    reply(.failed)
                }
            }
        }
    }

    /// What was found since the last call, oldest first.
    func take() -> [Report] { pending.withLock { reports in defer { reports = [] }; return reports } }

    var failureCount: UInt64 { failures.load(ordering: .relaxed) }
    var isFailing: Bool { failing.load(ordering: .relaxed) }

    /// What `/metrics` shows of it.
    var metrics: UserDatabaseMetrics {
        UserDatabaseMetrics(up: !isFailing, users: users.load(ordering: .relaxed), failures: failureCount)
    }

    /// Seconds after which the database is read again even if no change was seen: a backstop
    /// for changes a database's counters miss (PostgreSQL's TRUNCATE, statistics turned off).
    static let rereadSeconds: Double = 60

    private func run() {
        let database = open()
        var last: UserDatabaseView? = nil
        var lastRead = Date.distantPast
        while !stopped.load(ordering: .relaxed) {
            do {
                if try database.changed() || Date().timeIntervalSince(lastRead) >= Self.rereadSeconds {
                    let view = try database.read()
                    lastRead = Date()
                    failing.store(false, ordering: .relaxed)
                    users.store(view.userCount, ordering: .relaxed)
                    // A read that found what the last one did changes nothing downstream.
                    if view != last { pending.withLock { $0.append(.view(view)) } }
                    last = view
                } else {
                    failing.store(false, ordering: .relaxed)
                }
            } catch {
                failures.add(1, ordering: .relaxed)
                if !failing.exchange(true, ordering: .relaxed) {
                    pending.withLock { $0.append(.failed(error.description)) }
                }
            }
            var left = interval
            while left > 0 && !stopped.load(ordering: .relaxed) {
                Thread.sleep(forTimeInterval: min(left, 0.2))
                left -= 0.2
            }
        }
    }
}
