import CLibPQ
import Glibc
import RelayCore

/// coturn's user database in PostgreSQL (`psql-userdb`), through libpq, read as coturn's
/// `schema.sql` lays it out (docs/userdb.md). Read-only, on `UserDatabaseWatcher`'s thread.
final class PostgresUserDatabase: UserDatabaseSource {
    typealias Failure = UserDatabaseFailure

    /// The libpq connection string coturn's `psql-userdb` takes (`host=… dbname=… user=…`).
    private let conninfo: String
    private var connection: OpaquePointer?
    private var lastToken: String?

    /// Seconds a connection attempt may take, unless the connection string says otherwise.
    static let connectTimeout = 5

    init(conninfo: String) { self.conninfo = conninfo }

    deinit { if let connection { PQfinish(connection) } }

    /// The connection string's settings as libpq reads them (the `key=value` form or a
    /// `postgresql://` URI), nil when libpq cannot parse it.
    static func settings(_ conninfo: String) -> [(key: String, value: String)]? {
        guard let options = PQconninfoParse(conninfo, nil) else { return nil }
        defer { PQconninfoFree(options) }
        var settings: [(key: String, value: String)] = []
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { settings.append((String(cString: keyword), String(cString: value))) }
            option += 1
        }
        return settings
    }

    /// The connection string with its password replaced, for logs and `check-config`.
    static func redacted(_ conninfo: String) -> String {
        guard let settings = settings(conninfo) else { return "(a connection string libpq cannot parse)" }
        return settings.map { "\($0.key)=\($0.key == "password" ? "…" : $0.value)" }.joined(separator: " ")
    }

    /// Connects with `conninfo`'s settings, plus `connect_timeout` when it has none, and a
    /// statement and lock timeout for the session, so a locked table or a silent server never
    /// holds the reading thread for long.
    static func connect(_ conninfo: String) throws(Failure) -> OpaquePointer {
        guard var settings = settings(conninfo) else { throw Failure(description: "libpq cannot parse the connection string") }
        if !settings.contains(where: { $0.key == "connect_timeout" }) {
            settings.append(("connect_timeout", String(connectTimeout)))
        }
        if !settings.contains(where: { $0.key == "options" }) {
            settings.append(("options", "-c statement_timeout=10000 -c lock_timeout=5000"))
        }
        let keys = settings.map { strdup($0.key) }
        let values = settings.map { strdup($0.value) }
        defer { for pointer in keys + values { free(pointer) } }
        let keyPointers = keys.map { UnsafePointer($0) } + [nil]
        let valuePointers = values.map { UnsafePointer($0) } + [nil]
        guard let connection = PQconnectdbParams(keyPointers, valuePointers, 0) else {
            throw Failure(description: "libpq: out of memory")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(connection)).trimmingTrailingNewlines
            PQfinish(connection)
            throw Failure(description: "cannot connect to PostgreSQL: \(message)")
        }
        return connection
    }

    /// PostgreSQL's own counts of rows inserted, updated and deleted in coturn's tables, their
    /// live rows and their files: they move with every committed change (each session's counts
    /// reach the statistics when its transaction ends, or within seconds while it stays
    /// connected; a TRUNCATE gives the table a new file). The watcher also reads again once a
    /// minute whatever they say.
    func changed() throws(Failure) -> Bool {
        guard lastToken != nil else { return true }
        return try token() != lastToken
    }

    func read() throws(Failure) -> UserDatabaseView {
        let before = try token()
        var rows = UserDatabaseRows()
        let q = UserDatabaseRows.queries
        // A table coturn's schema has but this database lacks reads as empty.
        var existing = Set<String>()
        let names = UserDatabaseRows.tables.map { "'\($0)'" }.joined(separator: ",")
        try query("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename IN (\(names))", columns: 1) {
            if let name = $0[0] { existing.insert(name) }
        }
        func read(_ table: String, _ sql: String, columns: Int32, _ body: ([String?]) -> Void) throws(Failure) {
            guard existing.contains(table) else { return }
            try query(sql, columns: columns, body)
        }
        // One snapshot for every table.
        try query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", columns: 0) { _ in }
        do {
            try read("turnusers_lt", q.users, columns: 3) { rows.user(realm: $0[0], name: $0[1], hmackey: $0[2]) }
            try read("turn_secret", q.secrets, columns: 2) { rows.secret(realm: $0[0], value: $0[1]) }
            try read("allowed_peer_ip", q.allowed, columns: 2) { rows.peerRange(realm: $0[0], range: $0[1], allowed: true) }
            try read("denied_peer_ip", q.denied, columns: 2) { rows.peerRange(realm: $0[0], range: $0[1], allowed: false) }
            try read("turn_realm_option", q.options, columns: 3) { rows.option(realm: $0[0], name: $0[1], value: $0[2]) }
            try read("turn_origin_to_realm", q.origins, columns: 2) { rows.origin($0[0], realm: $0[1]) }
            try read("relayd_sha256_keys", q.sha256, columns: 4) {
                rows.sha256Key(realm: $0[0], name: $0[1], key: $0[2], hmackey: $0[3])
            }
        } catch {
            try? query("ROLLBACK", columns: 0) { _ in }
            throw error
        }
        try query("COMMIT", columns: 0) { _ in }
        lastToken = before
        return rows.finish()
    }

    func hmackey(name: String, realm: String) throws(Failure) -> String? {
        let connection = try connect()
        // coturn's index is (realm, name): a plain equality uses it; NULL is coturn's empty realm.
        let sql = "SELECT hmackey FROM turnusers_lt WHERE name = $1 AND (realm = $2 OR ($2 = '' AND realm IS NULL))"
        let result: OpaquePointer? = name.withCString { n in
            realm.withCString { r in
                var values: [UnsafePointer<CChar>?] = [n, r]
                return PQexecParams(connection, sql, 2, nil, &values, nil, nil, 0)
            }
        }
        guard let result else {
            throw Failure(description: "PostgreSQL: \(String(cString: PQerrorMessage(connection)).trimmingTrailingNewlines)")
        }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_TUPLES_OK else {
            throw Failure(description: "PostgreSQL: \(String(cString: PQresultErrorMessage(result)).trimmingTrailingNewlines)")
        }
        guard PQntuples(result) > 0, PQgetisnull(result, 0, 0) == 0 else { return nil }
        return String(cString: PQgetvalue(result, 0, 0))
    }

    private func token() throws(Failure) -> String {
        let names = UserDatabaseRows.tables.map { "'\($0)'" }.joined(separator: ",")
        var token = ""
        // TRUNCATE moves no row count but gives the table a new file (relfilenode) and no live rows.
        try query(
            "SELECT coalesce(sum(s.n_tup_ins + s.n_tup_upd + s.n_tup_del), 0)::text, count(*)::text, "
                + "coalesce(sum(s.n_live_tup), 0)::text, coalesce(string_agg(c.relfilenode::text, ',' ORDER BY c.relname), '') "
                + "FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname IN (\(names))", columns: 4
        ) { row in token = row.map { $0 ?? "" }.joined(separator: "/") }
        return token
    }

    private func connect() throws(Failure) -> OpaquePointer {
        if let connection, PQstatus(connection) == CONNECTION_OK { return connection }
        if let connection { PQfinish(connection) }
        connection = nil
        let fresh = try Self.connect(conninfo)
        connection = fresh
        return fresh
    }

    /// Runs `sql` and calls `body` with each row's first `columns` columns as text (nil for
    /// NULL).
    private func query(_ sql: String, columns: Int32, _ body: ([String?]) -> Void) throws(Failure) {
        let connection = try connect()
        guard let result = PQexec(connection, sql) else {
            throw Failure(description: "PostgreSQL: \(String(cString: PQerrorMessage(connection)).trimmingTrailingNewlines)")
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else {
            throw Failure(description: "PostgreSQL: \(String(cString: PQresultErrorMessage(result)).trimmingTrailingNewlines)")
        }
        guard status == PGRES_TUPLES_OK else { return }
        guard PQnfields(result) >= columns else { throw Failure(description: "PostgreSQL: \(sql): too few columns") }
        var row = [String?](repeating: nil, count: Int(columns))
        for index in 0..<PQntuples(result) {
            for column in 0..<columns {
                if PQgetisnull(result, index, column) != 0 {
                    row[Int(column)] = nil
                } else {
                    let length = Int(PQgetlength(result, index, column))
                    row[Int(column)] = PQgetvalue(result, index, column).withMemoryRebound(to: UInt8.self, capacity: length) {
                        String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
                    }
                }
            }
            body(row)
        }
    }
}

extension String {
    fileprivate var trimmingTrailingNewlines: String {
        var text = self
        while text.last == "\n" { text.removeLast() }
        return text
    }
}
