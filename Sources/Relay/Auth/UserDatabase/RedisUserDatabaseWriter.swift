import Glibc
import RelayCore

/// `relayd users` on coturn's user database in Redis (docs/userdb.md), in coturn's key layout, as
/// `turnadmin -N` writes it: a user's MD5 key at `turn/realm/<realm>/user/<name>/key`, the REST
/// secrets in the set `turn/realm/<realm>/secret`, a realm option at `turn/realm/<realm>/<opt>`.
/// Redis has no tables: the schema statements do nothing, and no SHA-256 key is stored (the
/// Redis layout has no place for one, so its users are MD5 users, docs/auth.md).
final class RedisUserDatabaseWriter: UserDatabaseWriter {
    private let client: RedisBlockingClient
    private let endpoint: RedisEndpoint

    init(endpoint: RedisEndpoint) throws(UserDatabaseFailure) {
        self.endpoint = endpoint
        // Keys are split at "/": a realm holding one would be read as another realm's key.
        do {
            client = try RedisBlockingClient(endpoint, timeout: timeval(tv_sec: 5, tv_usec: 0))
        } catch {
            throw UserDatabaseFailure(description: "Redis \(endpoint): \(error.description)")
        }
    }

    func execute(_ statement: UserDatabaseStatement, _ parameters: [String]) throws(UserDatabaseFailure) {
        let p = parameters
        if let realm = p.first, realm.contains("/") {
            throw UserDatabaseFailure(description: "Redis: a realm with '/' does not fit coturn's key layout")
        }
        switch statement {
        case .createUsers, .createSecrets, .createOptions, .createAllowed, .createDenied, .createOrigins, .createSHA256,
            .upsertSHA256, .deleteSHA256:
            return
        case .upsertUser: _ = try command(["SET", Self.userKey(realm: p[0], name: p[1]), p[2]])
        case .deleteUser:
            // The key, and the clear password older coturn versions kept beside it.
            _ = try command(["DEL", Self.userKey(realm: p[0], name: p[1]), "turn/realm/\(p[0])/user/\(p[1])/password"])
        case .insertSecret: _ = try command(["SADD", "turn/realm/\(p[0])/secret", p[1]])
        case .deleteSecret: _ = try command(["SREM", "turn/realm/\(p[0])/secret", p[1]])
        case .upsertOption: _ = try command(["SET", "turn/realm/\(p[0])/\(p[1])", p[2]])
        case .deleteOption: _ = try command(["DEL", "turn/realm/\(p[0])/\(p[1])"])
        case .listUsers, .listSecrets, .listOptions: _ = try rows(statement, parameters)
        }
    }

    func rows(_ statement: UserDatabaseStatement, _ parameters: [String]) throws(UserDatabaseFailure) -> [[String?]] {
        let realm = parameters.first ?? ""
        switch statement {
        case .listUsers:
            let prefix = "turn/realm/\(realm)/user/"
            var names: [String] = []
            var cursor = "0"
            repeat {
                let reply = try command(["SCAN", cursor, "MATCH", Self.globEscaped(prefix) + "*", "COUNT", "1000"])
                guard let parts = reply.elements, parts.count == 2, let next = parts[0].text, let keys = parts[1].elements
                else { throw UserDatabaseFailure(description: "Redis: SCAN answered \(reply)") }
                cursor = next
                for key in keys.compactMap(\.text) where key.hasPrefix(prefix) && key.hasSuffix("/key") {
                    names.append(String(key.dropFirst(prefix.count).dropLast("/key".count)))
                }
            } while cursor != "0"
            return names.sorted().map { [$0] }
        case .listSecrets:
            let members = try command(["SMEMBERS", "turn/realm/\(realm)/secret"]).elements ?? []
            return members.compactMap(\.text).sorted().map { [$0] }
        case .listOptions:
            let names = UserDatabaseEditor.options
            let values = try command(["MGET"] + names.map { "turn/realm/\(realm)/\($0)" }).elements ?? []
            return zip(names, values).compactMap { name, value in value.text.map { [name, $0] } }
        default:
            return []
        }
    }

    static func userKey(realm: String, name: String) -> String { "turn/realm/\(realm)/user/\(name)/key" }

    /// `text` with Redis's glob characters escaped, for a SCAN MATCH pattern.
    static func globEscaped(_ text: String) -> String {
        var out = ""
        for c in text {
            if "*?[]\\".contains(c) { out.append("\\") }
            out.append(c)
        }
        return out
    }

    private func command(_ arguments: [String]) throws(UserDatabaseFailure) -> RedisReply {
        do {
            return try client.command(arguments, what: arguments[0])
        } catch {
            throw UserDatabaseFailure(description: "Redis \(endpoint): \(error.description)")
        }
    }
}
