import ArgumentParser
import Foundation
import Relay

/// `relayd users …`: coturn's user database edited as `turnadmin` edits it (docs/userdb.md).
/// A running relayd sees every change within seconds, with no SIGHUP.
struct Users: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add, delete and list the users, REST secrets and realm options of coturn's user database.",
        discussion: """
            Writes coturn's schema (SQLite with --userdb, PostgreSQL with --psql-userdb, coturn's Redis key \
            layout with --redis-userdb, or the one -c's configuration names), so coturn and turnadmin read \
            what it writes. A user's MD5 key goes where turnadmin puts it; in SQLite and PostgreSQL its \
            SHA-256 key goes beside it, for clients that choose SHA-256.
            """,
        subcommands: [Add.self, Delete.self, List.self, AddSecret.self, DeleteSecret.self, ListSecrets.self, SetOption.self, Options.self])

    struct Database: ParsableArguments {
        @Option(name: [.customShort("c"), .customLong("config")], help: "relayd.conf naming userdb or psql-userdb, and the realm.")
        var config: String?

        @Option(name: [.customShort("b"), .customLong("userdb")], help: "coturn's SQLite file (created if missing).")
        var userdb: String?

        @Option(name: [.customShort("e"), .customLong("psql-userdb")], help: "A libpq connection string.")
        var psqlUserdb: String?

        @Option(name: [.customShort("r"), .customLong("realm")], help: "The realm (default: the configuration's).")
        var realm: String?

        @Option(name: [.customShort("N"), .customLong("redis-userdb")], help: "coturn's Redis: a redis:// URL or 'ip=… port=… dbname=… password=…'.")
        var redisUserdb: String?

        func editor() throws -> UserDatabaseEditor {
            var sqlite = userdb
            var postgres = psqlUserdb
            var redis: RedisEndpoint? = nil
            if let text = redisUserdb {
                guard let endpoint = RedisEndpoint.parseURL(text) ?? RedisEndpoint.parseStatsDB(text) else {
                    throw ValidationError("--redis-userdb: not a redis:// URL nor coturn's 'ip=… port=…' form")
                }
                redis = endpoint
            }
            var realm = realm
            if let config {
                let loaded = try LoadedConfiguration.load(["-c", config]).configuration
                if sqlite == nil && postgres == nil && redis == nil {
                    sqlite = loaded.userDatabase
                    postgres = loaded.postgresUserDatabase
                    redis = loaded.redisUserDatabase
                }
                if realm == nil { realm = loaded.realm }
            }
            guard let realm else { throw ValidationError("no realm: give --realm, or -c with a configuration") }
            do {
                return try UserDatabaseEditor(sqlite: sqlite, postgres: postgres, redis: redis, realm: realm)
            } catch {
                throw Users.fail(error)
            }
        }
    }

    static func fail(_ error: UserDatabaseFailure) -> ExitCode {
        FileHandle.standardError.write(Data("relayd users: \(error.description)\n".utf8))
        return ExitCode(1)
    }

    /// Runs `body`, turning a database failure into a message and exit code 1.
    static func run(_ body: () throws(UserDatabaseFailure) -> Void) throws {
        do { try body() } catch { throw fail(error) }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a long-term user, or give one a new password.")
        @OptionGroup var database: Database
        @Argument(help: "The user name.") var name: String
        @Option(name: [.customShort("p"), .customLong("password")], help: "The password (default: the first line of standard input).")
        var password: String?

        func run() throws {
            let editor = try database.editor()
            guard let password = password ?? readLine(strippingNewline: true), !password.isEmpty else {
                throw ValidationError("no password: give --password, or one line on standard input")
            }
            try Users.run { () throws(UserDatabaseFailure) in try editor.addUser(name, password: password) }
        }
    }

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a long-term user.")
        @OptionGroup var database: Database
        @Argument(help: "The user name.") var name: String
        func run() throws {
            let editor = try database.editor()
            try Users.run { () throws(UserDatabaseFailure) in try editor.deleteUser(name) }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the realm's long-term users.")
        @OptionGroup var database: Database
        func run() throws {
            let editor = try database.editor()
            try Users.run { () throws(UserDatabaseFailure) in for name in try editor.users() { print(name) } }
        }
    }

    struct AddSecret: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a REST secret (use-auth-secret) to the realm.")
        @OptionGroup var database: Database
        @Argument(help: "The secret.") var secret: String
        func run() throws {
            let editor = try database.editor()
            try Users.run { () throws(UserDatabaseFailure) in try editor.addSecret(secret) }
        }
    }

    struct DeleteSecret: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a REST secret of the realm.")
        @OptionGroup var database: Database
        @Argument(help: "The secret.") var secret: String
        func run() throws {
            let editor = try database.editor()
            try Users.run { () throws(UserDatabaseFailure) in try editor.deleteSecret(secret) }
        }
    }

    struct ListSecrets: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the realm's REST secrets.")
        @OptionGroup var database: Database
        func run() throws {
            let editor = try database.editor()
            try Users.run { () throws(UserDatabaseFailure) in for secret in try editor.secrets() { print(secret) } }
        }
    }

    struct SetOption: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a realm option: max-bps, total-quota or user-quota (as turnadmin -g).")
        @OptionGroup var database: Database
        @Argument(help: "max-bps, total-quota or user-quota.") var option: String
        @Argument(help: "A whole number, 0 or more.") var value: Int
        func run() throws {
            let editor = try database.editor()
            try Users.run { () throws(UserDatabaseFailure) in try editor.setOption(option, value) }
        }
    }

    struct Options: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the realm's options.")
        @OptionGroup var database: Database
        func run() throws {
            let editor = try database.editor()
            try Users.run { () throws(UserDatabaseFailure) in
                for (name, value) in try editor.realmOptions() { print("\(name)=\(value)") }
            }
        }
    }
}
