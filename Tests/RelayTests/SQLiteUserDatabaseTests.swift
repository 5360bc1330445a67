import CSQLite
import Foundation
import Glibc
import RelayCore
import StunCodec
import Testing

@testable import Relay

/// coturn's SQLite user database as relayd reads it (docs/userdb.md): the rows of coturn's
/// schema, bounds on every value, a change seen by `PRAGMA data_version`, and a damaged file that
/// is an error, never a crash.
@Suite struct SQLiteUserDatabaseTests {
    /// A database file with coturn's schema and `sql` run on it, written by SQLite itself.
    private func database(_ sql: String) throws -> String {
        let path = NSTemporaryDirectory() + "relayd-userdb-\(UUID().uuidString).sqlite"
        try write(path, Self.schema + sql)
        return path
    }

    private func write(_ path: String, _ sql: String) throws {
        var db: OpaquePointer?
        guard sqlite3_open(path, &db) == SQLITE_OK, let db else { throw Failure.open }
        defer { sqlite3_close(db) }
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else {
            throw Failure.sql(String(cString: sqlite3_errmsg(db)))
        }
    }

    enum Failure: Error { case open, sql(String) }

    /// coturn's schema.sql, the tables relayd reads.
    static let schema = """
        CREATE TABLE turnusers_lt (realm varchar(127) default '', name varchar(512), hmackey char(128), PRIMARY KEY (realm,name));
        CREATE TABLE turn_secret (realm varchar(127) default '', value varchar(256), primary key (realm,value));
        CREATE TABLE allowed_peer_ip (realm varchar(127) default '', ip_range varchar(256), primary key (realm,ip_range));
        CREATE TABLE denied_peer_ip (realm varchar(127) default '', ip_range varchar(256), primary key (realm,ip_range));
        CREATE TABLE turn_origin_to_realm (origin varchar(127), realm varchar(127), primary key (origin));
        CREATE TABLE turn_realm_option (realm varchar(127) default '', opt varchar(32), value varchar(128), primary key (realm,opt));

        """

    @Test("Every table of coturn's schema is read, per realm")
    func readsEveryTable() throws {
        let path = try database(
            """
            INSERT INTO turnusers_lt VALUES ('example.org', 'alice', 'a4983b36a4ba1bf01e71ad240b234e4b');
            INSERT INTO turnusers_lt VALUES ('example.org', 'bob', '\(String(repeating: "ab", count: 32))');
            INSERT INTO turnusers_lt VALUES ('other.example', 'carol', '00112233445566778899AABBCCDDEEFF');
            INSERT INTO turn_secret VALUES ('example.org', 'two'), ('example.org', 'one');
            INSERT INTO allowed_peer_ip VALUES ('example.org', '10.0.0.1-10.0.0.9');
            INSERT INTO denied_peer_ip VALUES ('example.org', '192.0.2.0-192.0.2.255');
            INSERT INTO turn_realm_option VALUES ('example.org', 'max-bps', '64000'), ('example.org', 'user-quota', '3');
            INSERT INTO turn_origin_to_realm VALUES ('https://app.example', 'example.org');
            """)
        defer { unlink(path) }
        let view = try SQLiteUserDatabase(path: path).read()
        let realm = try #require(view.realms["example.org"])
        #expect(realm.md5Keys["alice"] == [0xa4, 0x98, 0x3b, 0x36, 0xa4, 0xba, 0x1b, 0xf0, 0x1e, 0x71, 0xad, 0x24, 0x0b, 0x23, 0x4e, 0x4b])
        #expect(realm.sha256Keys["bob"] == [UInt8](repeating: 0xab, count: 32))
        #expect(realm.userCount == 2)
        #expect(realm.secrets == ["one", "two"])
        #expect(realm.allowedPeers == ["10.0.0.1-10.0.0.9"] && realm.deniedPeers == ["192.0.2.0-192.0.2.255"])
        #expect(realm.options == ["max-bps": "64000", "user-quota": "3"])
        #expect(view.realms["other.example"]?.md5Keys["carol"]?.first == 0x00)
        #expect(view.originToRealm == ["https://app.example": "example.org"])
        #expect(view.refusedRows == 0 && view.userCount == 3)
    }

    @Test("Keys that are not hex of 16 or 32 bytes, and values longer than the schema's, are refused and counted")
    func refusesBadRows() throws {
        let path = try database(
            """
            INSERT INTO turnusers_lt VALUES ('example.org', 'short', 'abcd');
            INSERT INTO turnusers_lt VALUES ('example.org', 'nothex', '\(String(repeating: "zz", count: 16))');
            INSERT INTO turnusers_lt VALUES ('example.org', 'nokey', NULL);
            INSERT INTO turnusers_lt VALUES ('example.org', '\(String(repeating: "n", count: 513))', '\(String(repeating: "00", count: 16))');
            INSERT INTO turn_secret VALUES ('example.org', '\(String(repeating: "s", count: 257))');
            INSERT INTO turn_secret VALUES ('example.org', '');
            INSERT INTO turnusers_lt VALUES ('example.org', 'good', '\(String(repeating: "01", count: 16))');
            """)
        defer { unlink(path) }
        let view = try SQLiteUserDatabase(path: path).read()
        #expect(view.refusedRows == 6)
        #expect(view.realms["example.org"]?.md5Keys.keys.sorted() == ["good"])
        #expect(view.realms["example.org"]?.secrets == [])
    }

    @Test("A file without some of the tables reads them as empty")
    func missingTables() throws {
        let path = NSTemporaryDirectory() + "relayd-userdb-\(UUID().uuidString).sqlite"
        try write(path, "CREATE TABLE turn_secret (realm varchar(127) default '', value varchar(256)); INSERT INTO turn_secret VALUES ('r', 's');")
        defer { unlink(path) }
        let view = try SQLiteUserDatabase(path: path).read()
        #expect(view.realms["r"]?.secrets == ["s"] && view.userCount == 0)
    }

    @Test("Another connection's commit is seen as a change; nothing else is")
    func changes() throws {
        let path = try database("INSERT INTO turn_secret VALUES ('r', 'one');")
        defer { unlink(path) }
        let reader = SQLiteUserDatabase(path: path)
        #expect(try reader.changed())
        _ = try reader.read()
        #expect(try !reader.changed())
        try write(path, "INSERT INTO turn_secret VALUES ('r', 'two');")
        #expect(try reader.changed())
        #expect(try reader.read().realms["r"]?.secrets == ["one", "two"])
        #expect(try !reader.changed())
    }

    /// `PRAGMA data_version` counts per connection: a new connection's numbers say nothing
    /// against the old one's, whatever commits each has seen.
    @Test(
        "A file replaced by garbage, then by a good database and changed, is read again",
        arguments: 0..<4)
    func replacedThenRestored(commitsBefore: Int) throws {
        let path = try database("INSERT INTO turn_secret VALUES ('r', 'one');")
        defer { unlink(path) }
        let saved = try Data(contentsOf: URL(fileURLWithPath: path))
        let reader = SQLiteUserDatabase(path: path)
        _ = try reader.read()
        for n in 0..<commitsBefore {
            try write(path, "INSERT INTO turn_secret VALUES ('r', 'extra\(n)');")
            _ = try reader.read()
        }
        // A new file (a new inode) that is not a database: the read fails after opening it.
        unlink(path)
        try Data([UInt8]("SQLite format 3\0".utf8) + [UInt8](repeating: 0x5a, count: 4096))
            .write(to: URL(fileURLWithPath: path))
        #expect(throws: SQLiteUserDatabase.Failure.self) { try reader.read() }
        // The good bytes back, rewritten in place (the same inode, as `cp` does), and changed.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: saved)
        try handle.close()
        _ = try reader.changed()
        try write(path, "INSERT INTO turn_secret VALUES ('r', 'two');")
        #expect(try reader.changed())
        #expect(try reader.read().realms["r"]?.secrets == ["one", "two"])
    }

    @Test("A missing, foreign or cut file is an error, never a crash")
    func damagedFiles() throws {
        #expect(throws: SQLiteUserDatabase.Failure.self) { try SQLiteUserDatabase(path: "/nonexistent/turndb").read() }
        let garbage = NSTemporaryDirectory() + "relayd-userdb-\(UUID().uuidString).sqlite"
        try Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 37) }).write(to: URL(fileURLWithPath: garbage))
        defer { unlink(garbage) }
        #expect(throws: SQLiteUserDatabase.Failure.self) { try SQLiteUserDatabase(path: garbage).read() }
        // A real database cut at every 512 bytes: each cut reads or fails, none traps.
        let path = try database(
            (0..<300).map { "INSERT INTO turnusers_lt VALUES ('r', 'user\($0)', '\(String(repeating: "0f", count: 16))');" }
                .joined(separator: "\n"))
        defer { unlink(path) }
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        let cut = NSTemporaryDirectory() + "relayd-userdb-\(UUID().uuidString).sqlite"
        defer { unlink(cut) }
        var failed = 0
        for length in stride(from: 0, to: whole.count, by: 512) {
            try whole.prefix(length).write(to: URL(fileURLWithPath: cut))
            do { _ = try SQLiteUserDatabase(path: cut).read() } catch { failed += 1 }
        }
        #expect(failed > 0)
        #expect(try SQLiteUserDatabase(path: path).read().userCount == 300)
    }

    @Test("relayd's SHA-256 keys join a user only while coturn's row holds the MD5 key written with them")
    func sha256KeysFollowCoturnsRow() throws {
        let path = NSTemporaryDirectory() + "relayd-userdb-\(UUID().uuidString).sqlite"
        defer { unlink(path) }
        let editor = try UserDatabaseEditor(sqlite: path, postgres: nil, realm: "example.org")
        try editor.addUser("alice", password: "one")
        try editor.addUser("bob", password: "two")
        var view = try SQLiteUserDatabase(path: path).read()
        let alice = KeyDerivation.longTermKeySHA256(
            username: Array("alice".utf8), realm: Array("example.org".utf8), password: Array("one".utf8))
        #expect(view.realms["example.org"]?.sha256Keys["alice"] == alice)
        #expect(view.realms["example.org"]?.md5Keys["alice"] == KeyDerivation.longTermKeyMD5(username: "alice", realm: "example.org", password: "one"))
        // turnadmin gives bob a new password (a new MD5 key): relayd's SHA-256 key of the old one is not taken.
        try write(path, "UPDATE turnusers_lt SET hmackey = '\(String(repeating: "0e", count: 16))' WHERE name = 'bob';")
        view = try SQLiteUserDatabase(path: path).read()
        #expect(view.realms["example.org"]?.sha256Keys["bob"] == nil)
        #expect(view.realms["example.org"]?.sha256Keys["alice"] == alice)
        #expect(try editor.users() == ["alice", "bob"])
        #expect(throws: UserDatabaseFailure.self) { try editor.setOption("bogus", 1) }
        #expect(throws: UserDatabaseFailure.self) { try editor.addUser("", password: "x") }
    }
}
