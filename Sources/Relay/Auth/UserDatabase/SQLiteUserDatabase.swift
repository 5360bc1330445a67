import CSQLite
import Glibc
import RelayCore

/// coturn's user database in SQLite, coturn's default (`userdb`), read as coturn's own
/// `schema.sql` lays it out (docs/userdb.md). Opened read-only: relayd never writes it here.
/// Not thread-safe: `UserDatabaseWatcher` owns it on its own thread.
final class SQLiteUserDatabase: UserDatabaseSource {
    typealias Failure = UserDatabaseFailure

    let path: String
    private var db: OpaquePointer?
    /// What identified the file and its last commit when it was last read.
    private var inode: ino_t = 0
    private var dataVersion: Int64 = -1

    init(path: String) { self.path = path }

    deinit { if let db { sqlite3_close_v2(db) } }

    /// Whether the database changed since the last `read` (another connection committed, or the
    /// file was replaced); true before the first read.
    func changed() throws(Failure) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { throw Failure(description: "\(path): \(String(cString: strerror(errno)))") }
        if db == nil || info.st_ino != inode { return true }
        return try version() != dataVersion
    }

    /// Everything relayd reads, afresh.
    func read() throws(Failure) -> UserDatabaseView {
        var info = stat()
        guard stat(path, &info) == 0 else { throw Failure(description: "\(path): \(String(cString: strerror(errno)))") }
        if db == nil || info.st_ino != inode {
            try open()
            inode = info.st_ino
        }
        // One read transaction: the tables are read as of one commit.
        try execute("BEGIN")
        defer { try? execute("COMMIT") }
        let version = try version()
        var rows = UserDatabaseRows()
        let q = UserDatabaseRows.queries
        try self.rows(q.users, columns: 3) { rows.user(realm: $0[0], name: $0[1], hmackey: $0[2]) }
        try self.rows(q.secrets, columns: 2) { rows.secret(realm: $0[0], value: $0[1]) }
        try self.rows(q.allowed, columns: 2) { rows.peerRange(realm: $0[0], range: $0[1], allowed: true) }
        try self.rows(q.denied, columns: 2) { rows.peerRange(realm: $0[0], range: $0[1], allowed: false) }
        try self.rows(q.options, columns: 3) { rows.option(realm: $0[0], name: $0[1], value: $0[2]) }
        try self.rows(q.origins, columns: 2) { rows.origin($0[0], realm: $0[1]) }
        try self.rows(q.sha256, columns: 4) { rows.sha256Key(realm: $0[0], name: $0[1], key: $0[2], hmackey: $0[3]) }
        let view = rows.finish()
        dataVersion = version
        return view
    }

    func hmackey(name: String, realm: String) throws(Failure) -> String? {
        // The file as it is now: a connection of its own when the one `read` keeps is to a
        // file since replaced (or none is open), which `read` then opens anew itself.
        var info = stat()
        guard stat(path, &info) == 0 else { throw Failure(description: "\(path): \(String(cString: strerror(errno)))") }
        if let db, info.st_ino == inode { return try hmackey(name: name, realm: realm, in: db) }
        let fresh = try Self.open(path, flags: SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, busyMilliseconds: 500)
        defer { sqlite3_close_v2(fresh) }
        return try hmackey(name: name, realm: realm, in: fresh)
    }

    private func hmackey(name: String, realm: String, in db: OpaquePointer) throws(Failure) -> String? {
        var statement: OpaquePointer?
        // coturn's index is (realm, name): a plain equality uses it; NULL is coturn's empty realm.
        let sql = "SELECT hmackey FROM turnusers_lt WHERE name = ?1 AND (realm = ?2 OR (?2 = '' AND realm IS NULL))"
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw Failure(description: "\(path): \(String(cString: sqlite3_errmsg(db)))")
        }
        defer { sqlite3_finalize(statement) }
        sqlite3_bind_text(statement, 1, name, -1, relayd_sqlite_transient())
        sqlite3_bind_text(statement, 2, realm, -1, relayd_sqlite_transient())
        switch sqlite3_step(statement) {
        case SQLITE_ROW:
            guard let text = sqlite3_column_text(statement, 0) else { return nil }
            return String(cString: text)
        case SQLITE_DONE:
            return nil
        default:
            throw Failure(description: "\(path): \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    private func open() throws(Failure) {
        if let db { sqlite3_close_v2(db) }
        db = nil
        // `PRAGMA data_version` counts per connection: the last read's number says nothing of a
        // new connection's, so the file counts as changed until a read through this one succeeds
        // (a file replaced by one that failed to read, then by a good one, is read again).
        dataVersion = -1
        // A writer holding the lock briefly (turnadmin) is waited for, a little.
        db = try Self.open(path, flags: SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, busyMilliseconds: 500)
    }

    /// A handle on the file at `path`, opened with `flags`; a writer's lock is waited for up to
    /// `busyMilliseconds`.
    static func open(_ path: String, flags: Int32, busyMilliseconds: Int32) throws(Failure) -> OpaquePointer {
        var handle: OpaquePointer?
        let status = sqlite3_open_v2(path, &handle, flags, nil)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(status))
            if let handle { sqlite3_close_v2(handle) }
            throw Failure(description: "cannot open \(path): \(message)")
        }
        sqlite3_busy_timeout(handle, busyMilliseconds)
        return handle
    }

    /// `PRAGMA data_version`: changes whenever another connection commits (SQLite's own
    /// change counter for exactly this use).
    private func version() throws(Failure) -> Int64 {
        var version: Int64 = -1
        try rows("PRAGMA data_version", columns: 1) { row in version = Int64(row[0] ?? "") ?? -1 }
        return version
    }

    private func execute(_ sql: String) throws(Failure) {
        guard let db else { throw Failure(description: "\(path) is not open") }
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw Failure(description: "\(path): \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    /// Runs `sql` and calls `body` with each row's first `columns` columns as text (nil for
    /// NULL). A table coturn's schema has but this file lacks reads as empty.
    private func rows(_ sql: String, columns: Int32, _ body: ([String?]) -> Void) throws(Failure) {
        guard let db else { throw Failure(description: "\(path) is not open") }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            let message = String(cString: sqlite3_errmsg(db))
            if message.hasPrefix("no such table") { return }
            throw Failure(description: "\(path): \(message)")
        }
        defer { sqlite3_finalize(statement) }
        guard sqlite3_column_count(statement) >= columns else { throw Failure(description: "\(path): \(sql): too few columns") }
        var row = [String?](repeating: nil, count: Int(columns))
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { return }
            guard status == SQLITE_ROW else { throw Failure(description: "\(path): \(String(cString: sqlite3_errmsg(db)))") }
            for column in 0..<columns {
                if let text = sqlite3_column_text(statement, column) {
                    let length = Int(sqlite3_column_bytes(statement, column))
                    row[Int(column)] = String(decoding: UnsafeBufferPointer(start: text, count: length), as: UTF8.self)
                } else {
                    row[Int(column)] = nil
                }
            }
            body(row)
        }
    }
}
