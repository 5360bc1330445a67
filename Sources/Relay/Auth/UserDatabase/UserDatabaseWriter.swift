import RelayCore

/// What `relayd users` writes into coturn's user database (docs/userdb.md), in coturn's schema
/// so that coturn and `turnadmin` read it too. relayd adds one table of its own,
/// `relayd_sha256_keys` (realm, name, key, hmackey), holding a user's SHA-256 key (RFC 8489
/// §18.5.1.2) and the MD5 `hmackey` written with it: coturn ignores the table; relayd's reader
/// takes the SHA-256 key only while coturn's row still holds that same MD5 key, so a user that
/// `turnadmin` deletes or gives a new password loses the SHA-256 key too.
protocol UserDatabaseWriter: AnyObject {
    /// Runs `statement` with `parameters` bound in order (`?` in SQLite, `$1…` in PostgreSQL,
    /// as `UserDatabaseStatements` writes them).
    func execute(_ statement: UserDatabaseStatement, _ parameters: [String]) throws(UserDatabaseFailure)
    /// Rows of a query, each column as text.
    func rows(_ statement: UserDatabaseStatement, _ parameters: [String]) throws(UserDatabaseFailure) -> [[String?]]
}

/// The statements `relayd users` runs, in both databases' dialects.
enum UserDatabaseStatement: CaseIterable {
    case createUsers, createSecrets, createOptions, createAllowed, createDenied, createOrigins, createSHA256
    case upsertUser, upsertSHA256, deleteUser, deleteSHA256, listUsers
    case insertSecret, deleteSecret, listSecrets
    case upsertOption, deleteOption, listOptions

    /// The SQL, with parameters written `?` (SQLite) or `$n` (PostgreSQL).
    func sql(postgres: Bool) -> String {
        var text = template
        if postgres {
            var index = 0
            while let mark = text.firstIndex(of: "?") {
                index += 1
                text.replaceSubrange(mark...mark, with: "$\(index)")
            }
        }
        return text
    }

    private var template: String {
        switch self {
        // coturn's schema.sql, the tables relayd reads (created only when missing).
        case .createUsers:
            return "CREATE TABLE IF NOT EXISTS turnusers_lt (realm varchar(127) default '', name varchar(512), hmackey char(128), PRIMARY KEY (realm,name))"
        case .createSecrets:
            return "CREATE TABLE IF NOT EXISTS turn_secret (realm varchar(127) default '', value varchar(256), primary key (realm,value))"
        case .createOptions:
            return "CREATE TABLE IF NOT EXISTS turn_realm_option (realm varchar(127) default '', opt varchar(32), value varchar(128), primary key (realm,opt))"
        case .createAllowed:
            return "CREATE TABLE IF NOT EXISTS allowed_peer_ip (realm varchar(127) default '', ip_range varchar(256), primary key (realm,ip_range))"
        case .createDenied:
            return "CREATE TABLE IF NOT EXISTS denied_peer_ip (realm varchar(127) default '', ip_range varchar(256), primary key (realm,ip_range))"
        case .createOrigins:
            return "CREATE TABLE IF NOT EXISTS turn_origin_to_realm (origin varchar(127), realm varchar(127), primary key (origin))"
        case .createSHA256:
            return "CREATE TABLE IF NOT EXISTS relayd_sha256_keys (realm varchar(127) default '', name varchar(512), key varchar(64), hmackey varchar(32), PRIMARY KEY (realm,name))"
        case .upsertUser:
            return "INSERT INTO turnusers_lt (realm, name, hmackey) VALUES (?, ?, ?) ON CONFLICT (realm, name) DO UPDATE SET hmackey = excluded.hmackey"
        case .upsertSHA256:
            return "INSERT INTO relayd_sha256_keys (realm, name, key, hmackey) VALUES (?, ?, ?, ?) ON CONFLICT (realm, name) DO UPDATE SET key = excluded.key, hmackey = excluded.hmackey"
        case .deleteUser:
            return "DELETE FROM turnusers_lt WHERE realm = ? AND name = ?"
        case .deleteSHA256:
            return "DELETE FROM relayd_sha256_keys WHERE realm = ? AND name = ?"
        case .listUsers:
            return "SELECT name FROM turnusers_lt WHERE realm = ? ORDER BY name"
        case .insertSecret:
            return "INSERT INTO turn_secret (realm, value) VALUES (?, ?) ON CONFLICT DO NOTHING"
        case .deleteSecret:
            return "DELETE FROM turn_secret WHERE realm = ? AND value = ?"
        case .listSecrets:
            return "SELECT value FROM turn_secret WHERE realm = ? ORDER BY value"
        case .upsertOption:
            return "INSERT INTO turn_realm_option (realm, opt, value) VALUES (?, ?, ?) ON CONFLICT (realm, opt) DO UPDATE SET value = excluded.value"
        case .deleteOption:
            return "DELETE FROM turn_realm_option WHERE realm = ? AND opt = ?"
        case .listOptions:
            return "SELECT opt, value FROM turn_realm_option WHERE realm = ? ORDER BY opt"
        }
    }

    static let schema: [UserDatabaseStatement] = [
        .createUsers, .createSecrets, .createOptions, .createAllowed, .createDenied, .createOrigins, .createSHA256,
    ]
}

/// `relayd users`: coturn's user database edited as `turnadmin` edits it (docs/userdb.md).
public final class UserDatabaseEditor {
    private let db: any UserDatabaseWriter
    public let realm: String

    /// The realm options coturn knows (`turnadmin -g`).
    public static let options = ["max-bps", "total-quota", "user-quota"]

    /// The SQLite file (created if missing) or the PostgreSQL database, with coturn's tables
    /// (and relayd's `relayd_sha256_keys`) created where missing.
    public init(sqlite path: String?, postgres conninfo: String?, redis: RedisEndpoint? = nil, realm: String)
        throws(UserDatabaseFailure)
    {
        if let path {
            db = try SQLiteUserDatabaseWriter(path: path)
        } else if let conninfo {
            db = try PostgresUserDatabaseWriter(conninfo: conninfo)
        } else if let redis {
            db = try RedisUserDatabaseWriter(endpoint: redis)
        } else {
            throw UserDatabaseFailure(
                description: "no user database: give --userdb, --psql-userdb or --redis-userdb, or -c with one")
        }
        self.realm = realm
        for statement in UserDatabaseStatement.schema { try db.execute(statement, []) }
    }

    /// Adds or replaces `name` with `password` (prepared as RFC 8265's OpaqueString, RFC 8489
    /// §9.2.2): its MD5 key in coturn's `turnusers_lt`, as turnadmin writes it, and its SHA-256
    /// key in `relayd_sha256_keys`.
    public func addUser(_ name: String, password: String) throws(UserDatabaseFailure) {
        guard !name.isEmpty, name.utf8.count <= UserDatabaseRows.maxName, realm.utf8.count <= UserDatabaseRows.maxRealm else {
            throw UserDatabaseFailure(description: "a user name is 1 to 512 bytes, a realm at most 127")
        }
        let (md5, sha256) = CredentialStore.longTermKeys(name: name, realm: realm, password: password)
        try db.execute(.upsertUser, [realm, name, Self.hex(md5)])
        try db.execute(.upsertSHA256, [realm, name, Self.hex(sha256), Self.hex(md5)])
    }

    public func deleteUser(_ name: String) throws(UserDatabaseFailure) {
        try db.execute(.deleteUser, [realm, name])
        try db.execute(.deleteSHA256, [realm, name])
    }

    public func users() throws(UserDatabaseFailure) -> [String] {
        try db.rows(.listUsers, [realm]).compactMap { $0.first ?? nil }
    }

    public func addSecret(_ secret: String) throws(UserDatabaseFailure) {
        guard !secret.isEmpty, secret.utf8.count <= UserDatabaseRows.maxSecret else {
            throw UserDatabaseFailure(description: "a secret is 1 to 256 bytes")
        }
        try db.execute(.insertSecret, [realm, secret])
    }

    public func deleteSecret(_ secret: String) throws(UserDatabaseFailure) { try db.execute(.deleteSecret, [realm, secret]) }

    public func secrets() throws(UserDatabaseFailure) -> [String] {
        try db.rows(.listSecrets, [realm]).compactMap { $0.first ?? nil }
    }

    /// Sets one of `options` to a whole number, as `turnadmin -g` does: 0 removes the option,
    /// so the realm falls back to the configured value (coturn reads a stored 0 as "unlimited").
    public func setOption(_ option: String, _ value: Int) throws(UserDatabaseFailure) {
        guard Self.options.contains(option), value >= 0 else {
            throw UserDatabaseFailure(description: "realm options are \(Self.options.joined(separator: ", ")), each 0 or more")
        }
        if value == 0 {
            try db.execute(.deleteOption, [realm, option])
        } else {
            try db.execute(.upsertOption, [realm, option, String(value)])
        }
    }

    public func realmOptions() throws(UserDatabaseFailure) -> [(String, String)] {
        try db.rows(.listOptions, [realm]).compactMap { row in
            guard row.count == 2, let name = row[0], let value = row[1] else { return nil }
            return (name, value)
        }
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
