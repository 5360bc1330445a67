import RelayCore

/// Builds a `UserDatabaseView` from the rows of coturn's schema, whichever database they come
/// from (docs/userdb.md): each value is checked against the schema's bounds, and a row that
/// does not fit is skipped and counted, never trusted.
struct UserDatabaseRows {
    private(set) var view = UserDatabaseView()

    /// The longest values coturn's schema allows.
    static let maxRealm = 127
    static let maxName = 512
    static let maxSecret = 256
    static let maxRange = 256
    static let maxOptionName = 32
    static let maxOption = 128

    /// The tables and columns relayd reads, in the order of the calls below.
    static let queries = (
        users: "SELECT realm, name, hmackey FROM turnusers_lt",
        secrets: "SELECT realm, value FROM turn_secret",
        allowed: "SELECT realm, ip_range FROM allowed_peer_ip",
        denied: "SELECT realm, ip_range FROM denied_peer_ip",
        options: "SELECT realm, opt, value FROM turn_realm_option",
        origins: "SELECT origin, realm FROM turn_origin_to_realm",
        sha256: "SELECT realm, name, key, hmackey FROM relayd_sha256_keys"
    )
    static let tables = [
        "turnusers_lt", "turn_secret", "allowed_peer_ip", "denied_peer_ip", "turn_realm_option", "turn_origin_to_realm",
        "relayd_sha256_keys",
    ]
    /// relayd's SHA-256 keys, kept apart until `finish` checks them against coturn's rows.
    private var written: [(realm: String, name: String, key: [UInt8], md5: [UInt8])] = []

    /// `turnusers_lt`: a NULL realm is coturn's default, the empty one. `hmackey` is `char(128)`,
    /// which PostgreSQL pads with spaces.
    mutating func user(realm: String?, name: String?, hmackey: String?) {
        guard let realm = Self.bounded(realm ?? "", Self.maxRealm), let name, !name.isEmpty,
            Self.bounded(name, Self.maxName) != nil, let key = hmackey.flatMap({ Self.hexKey(Self.unpadded($0)) })
        else { return view.refusedRows += 1 }
        if key.count == 16 {
            view.realms[realm, default: .init()].md5Keys[name] = key
        } else {
            view.realms[realm, default: .init()].sha256Keys[name] = key
        }
    }

    mutating func secret(realm: String?, value: String?) {
        guard let realm = Self.bounded(realm ?? "", Self.maxRealm), let value = value.flatMap({ Self.bounded($0, Self.maxSecret) }),
            !value.isEmpty
        else { return view.refusedRows += 1 }
        view.realms[realm, default: .init()].secrets.append(value)
    }

    mutating func peerRange(realm: String?, range: String?, allowed: Bool) {
        guard let realm = Self.bounded(realm ?? "", Self.maxRealm), let range = range.flatMap({ Self.bounded($0, Self.maxRange) })
        else { return view.refusedRows += 1 }
        if allowed {
            view.realms[realm, default: .init()].allowedPeers.append(range)
        } else {
            view.realms[realm, default: .init()].deniedPeers.append(range)
        }
    }

    mutating func option(realm: String?, name: String?, value: String?) {
        guard let realm = Self.bounded(realm ?? "", Self.maxRealm), let name = name.flatMap({ Self.bounded($0, Self.maxOptionName) }),
            let value = value.flatMap({ Self.bounded($0, Self.maxOption) })
        else { return view.refusedRows += 1 }
        view.realms[realm, default: .init()].options[name] = value
    }

    mutating func origin(_ origin: String?, realm: String?) {
        guard let origin = origin.flatMap({ Self.bounded($0, Self.maxRealm) }), let realm = realm.flatMap({ Self.bounded($0, Self.maxRealm) })
        else { return view.refusedRows += 1 }
        view.originToRealm[origin] = realm
    }

    /// A row that could not be read at all (a Redis key of the wrong type).
    mutating func refuse() { view.refusedRows += 1 }

    /// `relayd_sha256_keys`, which `relayd users` writes (`UserDatabaseWriter`).
    mutating func sha256Key(realm: String?, name: String?, key: String?, hmackey: String?) {
        guard let realm = Self.bounded(realm ?? "", Self.maxRealm), let name, Self.bounded(name, Self.maxName) != nil,
            let key = key.flatMap({ Self.hexKey(Self.unpadded($0)) }), key.count == 32,
            let md5 = hmackey.flatMap({ Self.hexKey(Self.unpadded($0)) }), md5.count == 16
        else { return view.refusedRows += 1 }
        written.append((realm, name, key, md5))
    }

    /// The view: a SHA-256 key of relayd's table joins a user only while coturn's row holds the
    /// MD5 key it was written with (a user deleted, or given a new password, by turnadmin keeps
    /// no stale key); secrets in a stable order.
    mutating func finish() -> UserDatabaseView {
        for entry in written where view.realms[entry.realm]?.md5Keys[entry.name] == entry.md5 {
            view.realms[entry.realm]!.sha256Keys[entry.name] = entry.key
        }
        written = []
        for key in view.realms.keys { view.realms[key]!.secrets.sort() }
        return view
    }

    static func unpadded(_ text: String) -> String {
        var text = Substring(text)
        while text.last == " " { text.removeLast() }
        return String(text)
    }

    private static func bounded(_ text: String, _ limit: Int) -> String? { text.utf8.count <= limit ? text : nil }

    /// A long-term key written as hex: 16 bytes (MD5) or 32 (SHA-256); nil otherwise.
    static func hexKey(_ text: String) -> [UInt8]? {
        guard let key = ConfigValueParser.hexBytes(Substring(text)), key.count == 16 || key.count == 32 else { return nil }
        return key
    }
}

/// A user database relayd reads (docs/userdb.md), on `UserDatabaseWatcher`'s thread only.
protocol UserDatabaseSource: AnyObject {
    /// Whether the database changed since the last `read`; true before the first.
    func changed() throws(UserDatabaseFailure) -> Bool
    /// Everything relayd reads, afresh.
    func read() throws(UserDatabaseFailure) -> UserDatabaseView
    /// One user's `hmackey` as the database holds it (hex), nil when it has no such user: the
    /// lookup of a user the view does not have yet.
    func hmackey(name: String, realm: String) throws(UserDatabaseFailure) -> String?
}

extension UserDatabaseSource {
    /// The MD5 key of `name` in `realm` (RFC 8489 §9.2.2), nil when the database has none or
    /// holds something that is not one.
    func md5Key(name: String, realm: String) throws(UserDatabaseFailure) -> [UInt8]? {
        guard let text = try hmackey(name: name, realm: realm),
            let key = UserDatabaseRows.hexKey(UserDatabaseRows.unpadded(text)), key.count == 16
        else { return nil }
        return key
    }
}

/// Why a user database could not be read or written.
public struct UserDatabaseFailure: Error, CustomStringConvertible {
    public let description: String
}
