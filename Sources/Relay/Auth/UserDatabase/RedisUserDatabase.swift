import Glibc
import RelayCore

/// coturn's user database in Redis (`redis-userdb`), through hiredis, in coturn's key layout
/// (docs/userdb.md): `turn/realm/<realm>/user/<name>/key` holds a user's hex key,
/// `turn/realm/<realm>/secret` the set of REST secrets, `…/allowed-peer-ip` and
/// `…/denied-peer-ip` sets of ranges, `…/max-bps`, `…/total-quota`, `…/user-quota` the realm's
/// options, and `turn/origin/<origin>` an origin's realm. Read-only, on `UserDatabaseWatcher`'s
/// thread.
final class RedisUserDatabase: UserDatabaseSource {
    typealias Failure = UserDatabaseFailure

    private let endpoint: RedisEndpoint
    private var client: RedisBlockingClient?
    private var lastToken: String?

    /// Keys a SCAN step asks for, and the most keys one MGET fetches.
    static let batch = 1000
    static let timeout = timeval(tv_sec: 5, tv_usec: 0)

    init(endpoint: RedisEndpoint) { self.endpoint = endpoint }

    /// Redis keeps no change counter per database; its count of writes since the last save
    /// (`rdb_changes_since_last_save`, with the save's time) and the database's size move with
    /// every change. A Redis that other writers share is therefore read again after each of
    /// their writes too, at most once a second.
    func changed() throws(Failure) -> Bool {
        guard lastToken != nil else { return true }
        return try token() != lastToken
    }

    func read() throws(Failure) -> UserDatabaseView {
        let before = try token()
        var rows = UserDatabaseRows()
        try scan("turn/realm/*") { keys throws(Failure) in
            var strings: [(key: String, realm: String, rest: Substring)] = []
            for key in keys {
                guard let (realm, rest) = Self.realmKey(key) else { continue }
                switch rest {
                case "secret", "allowed-peer-ip", "denied-peer-ip":
                    // A key of another type is that key's problem, not every realm's.
                    guard let members = try? command(["SMEMBERS", key]).elements else {
                        rows.refuse()
                        continue
                    }
                    for member in members {
                        switch rest {
                        case "secret": rows.secret(realm: realm, value: member.text)
                        default: rows.peerRange(realm: realm, range: member.text, allowed: rest == "allowed-peer-ip")
                        }
                    }
                case "max-bps", "total-quota", "user-quota":
                    strings.append((key, realm, rest))
                default:
                    if rest.hasPrefix("user/") && rest.hasSuffix("/key") { strings.append((key, realm, rest)) }
                }
            }
            guard !strings.isEmpty else { return }
            let values = try command(["MGET"] + strings.map(\.key)).elements ?? []
            guard values.count == strings.count else { throw Failure(description: "Redis: MGET answered \(values.count) of \(strings.count)") }
            for (entry, value) in zip(strings, values) {
                if entry.rest.hasPrefix("user/") {
                    let name = entry.rest.dropFirst("user/".count).dropLast("/key".count)
                    rows.user(realm: entry.realm, name: String(name), hmackey: value.text)
                } else {
                    rows.option(realm: entry.realm, name: String(entry.rest), value: value.text)
                }
            }
        }
        try scan("turn/origin/*") { keys throws(Failure) in
            let values = try command(["MGET"] + keys).elements ?? []
            guard values.count == keys.count else { throw Failure(description: "Redis: MGET answered \(values.count) of \(keys.count)") }
            for (key, value) in zip(keys, values) { rows.origin(String(key.dropFirst("turn/origin/".count)), realm: value.text) }
        }
        lastToken = before
        return rows.finish()
    }

    /// `turn/realm/<realm>/<rest>` as (realm, rest).
    static func realmKey(_ key: String) -> (String, Substring)? {
        guard key.hasPrefix("turn/realm/") else { return nil }
        let tail = key.dropFirst("turn/realm/".count)
        guard let slash = tail.firstIndex(of: "/") else { return nil }
        return (String(tail[..<slash]), tail[tail.index(after: slash)...])
    }

    func hmackey(name: String, realm: String) throws(Failure) -> String? {
        try command(["GET", "turn/realm/\(realm)/user/\(name)/key"]).text
    }

    private func token() throws(Failure) -> String {
        let info = try command(["INFO", "persistence"]).text ?? ""
        let size = try command(["DBSIZE"]).integer ?? -1
        let fields = info.split(whereSeparator: \.isNewline).filter {
            $0.hasPrefix("rdb_changes_since_last_save:") || $0.hasPrefix("rdb_last_save_time:")
        }
        return fields.joined(separator: ",") + ",\(size)"
    }

    /// Every key matching `pattern`, a SCAN step at a time.
    private func scan(_ pattern: String, _ body: ([String]) throws(Failure) -> Void) throws(Failure) {
        var cursor = "0"
        repeat {
            let reply = try command(["SCAN", cursor, "MATCH", pattern, "COUNT", String(Self.batch)])
            guard let parts = reply.elements, parts.count == 2, let next = parts[0].text, let keys = parts[1].elements else {
                throw Failure(description: "Redis: SCAN answered \(reply)")
            }
            cursor = next
            let names = keys.compactMap(\.text)
            if !names.isEmpty { try body(names) }
        } while cursor != "0"
    }

    private func command(_ arguments: [String]) throws(Failure) -> RedisReply {
        do {
            if client == nil { client = try RedisBlockingClient(endpoint, timeout: Self.timeout) }
            return try client!.command(arguments, what: arguments[0])
        } catch {
            client = nil
            throw Failure(description: "Redis \(endpoint): \(error.description)")
        }
    }
}
