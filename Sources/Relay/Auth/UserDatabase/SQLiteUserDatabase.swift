import CSQLite
import Glibc
import RelayCore

/// coturn's user database in SQLite, coturn's default (`userdb`), read as coturn's own
/// `schema.sql` lays it out (docs/userdb.md). Opened read-only: relayd never writes it here.
/// Not thread-safe: `UserDatabaseWatcher` owns it on its own thread.
final class SQLiteUserDatabase {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let path: String
    private var db: OpaquePointer?
    /// What identified the file and its last commit when it was last read.
    private var inode: ino_t = 0
    private var dataVersion: Int64 = -1

    /// Longest values coturn's schema allows; longer rows are refused (counted).
    static let maxRealm = 127
    static let maxName = 512
    static let maxSecret = 256
    static let maxRange = 256
    static let maxOption = 128

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
        var view = UserDatabaseView()
        try rows("SELECT realm, name, hmackey FROM turnusers_lt", columns: 3) { row in
            guard let realm = Self.bounded(row[0] ?? "", Self.maxRealm), let name = row[1],
                Self.bounded(name, Self.maxName) != nil, !name.isEmpty, let key = row[2].flatMap(Self.hexKey)
            else { return view.refusedRows += 1 }
            if key.count == 16 { view.realms[realm, default: .init()].md5Keys[name] = key }
            else { view.realms[realm, default: .init()].sha256Keys[name] = key }
        }
        try rows("SELECT realm, value FROM turn_secret", columns: 2) { row in
            guard let realm = Self.bounded(row[0] ?? "", Self.maxRealm), let secret = row[1].flatMap({ Self.bounded($0, Self.maxSecret) }),
                !secret.isEmpty
            else { return view.refusedRows += 1 }
            view.realms[realm, default: .init()].secrets.append(secret)
        }
        for (table, allowed) in [("allowed_peer_ip", true), ("denied_peer_ip", false)] {
            try rows("SELECT realm, ip_range FROM \(table)", columns: 2) { row in
                guard let realm = Self.bounded(row[0] ?? "", Self.maxRealm), let range = row[1].flatMap({ Self.bounded($0, Self.maxRange) })
                else { return view.refusedRows += 1 }
                if allowed { view.realms[realm, default: .init()].allowedPeers.append(range) }
                else { view.realms[realm, default: .init()].deniedPeers.append(range) }
            }
        }
        try rows("SELECT realm, opt, value FROM turn_realm_option", columns: 3) { row in
            guard let realm = Self.bounded(row[0] ?? "", Self.maxRealm), let option = row[1].flatMap({ Self.bounded($0, 32) }),
                let value = row[2].flatMap({ Self.bounded($0, Self.maxOption) })
            else { return view.refusedRows += 1 }
            view.realms[realm, default: .init()].options[option] = value
        }
        try rows("SELECT origin, realm FROM turn_origin_to_realm", columns: 2) { row in
            guard let origin = row[0].flatMap({ Self.bounded($0, Self.maxRealm) }), let realm = row[1].flatMap({ Self.bounded($0, Self.maxRealm) })
            else { return view.refusedRows += 1 }
            view.originToRealm[origin] = realm
        }
        for key in view.realms.keys { view.realms[key]!.secrets.sort() }
        dataVersion = version
        return view
    }

    private func open() throws(Failure) {
        if let db { sqlite3_close_v2(db) }
        db = nil
        var handle: OpaquePointer?
        let status = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(status))
            if let handle { sqlite3_close_v2(handle) }
            throw Failure(description: "cannot open \(path): \(message)")
        }
        // A writer holding the lock briefly (turnadmin) is waited for, a little.
        sqlite3_busy_timeout(handle, 500)
        db = handle
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

    private static func bounded(_ text: String, _ limit: Int) -> String? { text.utf8.count <= limit ? text : nil }

    /// A long-term key written as hex: 16 bytes (MD5) or 32 (SHA-256); nil otherwise.
    static func hexKey(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count == 32 || digits.count == 64 else { return nil }
        var key: [UInt8] = []
        key.reserveCapacity(digits.count / 2)
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x61...0x66: return c - 0x61 + 10
            case 0x41...0x46: return c - 0x41 + 10
            default: return nil
            }
        }
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let high = nibble(digits[i]), let low = nibble(digits[i + 1]) else { return nil }
            key.append(high << 4 | low)
        }
        return key
    }
}
