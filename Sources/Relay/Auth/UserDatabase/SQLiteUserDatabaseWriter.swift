import CSQLite

/// `relayd users` on coturn's SQLite user database (docs/userdb.md): opens the file read-write,
/// creating it (with coturn's tables) when it does not exist, as `turnadmin -b` does.
final class SQLiteUserDatabaseWriter: UserDatabaseWriter {
    private let db: OpaquePointer
    private let path: String

    init(path: String) throws(UserDatabaseFailure) {
        db = try SQLiteUserDatabase.open(path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, busyMilliseconds: 2000)
        self.path = path
    }

    deinit { sqlite3_close_v2(db) }

    func execute(_ statement: UserDatabaseStatement, _ parameters: [String]) throws(UserDatabaseFailure) {
        _ = try run(statement, parameters, columns: 0)
    }

    func rows(_ statement: UserDatabaseStatement, _ parameters: [String]) throws(UserDatabaseFailure) -> [[String?]] {
        try run(statement, parameters, columns: 2)
    }

    private func run(_ statement: UserDatabaseStatement, _ parameters: [String], columns: Int32) throws(UserDatabaseFailure)
        -> [[String?]]
    {
        var prepared: OpaquePointer?
        guard sqlite3_prepare_v2(db, statement.sql(postgres: false), -1, &prepared, nil) == SQLITE_OK, let prepared else {
            throw UserDatabaseFailure(description: "\(path): \(String(cString: sqlite3_errmsg(db)))")
        }
        defer { sqlite3_finalize(prepared) }
        for (index, value) in parameters.enumerated() {
            sqlite3_bind_text(prepared, Int32(index + 1), value, -1, relayd_sqlite_transient())
        }
        var rows: [[String?]] = []
        while true {
            let status = sqlite3_step(prepared)
            if status == SQLITE_DONE { return rows }
            guard status == SQLITE_ROW else {
                throw UserDatabaseFailure(description: "\(path): \(String(cString: sqlite3_errmsg(db)))")
            }
            let count = min(columns, sqlite3_column_count(prepared))
            rows.append(
                (0..<count).map { column in
                    sqlite3_column_text(prepared, column).map { String(cString: $0) }
                })
        }
    }
}
