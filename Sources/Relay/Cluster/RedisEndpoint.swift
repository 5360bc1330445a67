/// Where the cluster's Redis is (docs/cluster.md): `cluster-redis = redis://[user:password@]host:port[/db]`,
/// the sentinels that know its master (`redis+sentinel://…`, `RedisSentinel`), or coturn's
/// `redis-statsdb = "ip=… port=… dbname=… password=…"` naming the same thing. TLS to Redis is
/// not offered: Debian 12's hiredis (0.14) has none (docs/cluster.md, "TLS to Redis").
public struct RedisEndpoint: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// The ACL user (Redis 6 and later) for `AUTH user password`; nil sends `AUTH password`.
    public var user: String?
    public var password: String?
    /// The logical database (`SELECT`), 0 by default.
    public var database: Int
    /// The sentinels to ask where the master is; nil: `host` and `port` are Redis itself.
    public var sentinel: RedisSentinel?

    public init(host: String, port: Int = 6379, user: String? = nil, password: String? = nil, database: Int = 0) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
    }

    /// The URL with the password masked: safe for logs and the configuration summary.
    public var description: String {
        if let sentinel { return sentinel.description(master: self) }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "redis://\(Self.maskedUserinfo(user: user, password: password))\(shownHost):\(port)/\(database)"
    }

    /// `user:***@`, `:***@`, `user@` or nothing.
    static func maskedUserinfo(user: String?, password: String?) -> String {
        var auth = user ?? ""
        if password != nil { auth += ":\(RelayConfiguration.redaction)" }
        return auth.isEmpty ? "" : auth + "@"
    }

    /// This endpoint's credentials and database on the server at `host`:`port` (the master a
    /// sentinel named).
    func direct(host: String, port: Int) -> RedisEndpoint {
        RedisEndpoint(host: host, port: port, user: user, password: password, database: database)
    }

    static let expectedURL =
        "'redis://[user:password@]host[:port][/db]' or 'redis+sentinel://[user:password@]host[:port][,host[:port]…]/master-name[/db]'"
    static let expectedStatsDB = "'ip=… port=… dbname=… password=…' (coturn's redis-statsdb)"

    /// `redis://[user:password@]host[:port][/db]`; user and password are percent-decoded, an
    /// IPv6 host is in brackets.
    public static func parseURL(_ text: String) -> RedisEndpoint? {
        if text.lowercased().hasPrefix(RedisSentinel.scheme) {
            var endpoint = RedisEndpoint(host: "")
            guard let sentinel = RedisSentinel.parse(text.dropFirst(RedisSentinel.scheme.count), into: &endpoint) else {
                return nil
            }
            endpoint.sentinel = sentinel
            return endpoint
        }
        guard text.lowercased().hasPrefix("redis://") else { return nil }
        var rest = Substring(text.dropFirst("redis://".count))
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            if !db.isEmpty {
                guard let n = Int(db), (0...65535).contains(n) else { return nil }
                database = n
            }
            rest = rest[..<slash]
        }
        var user: String? = nil
        var password: String? = nil
        if let at = rest.lastIndex(of: "@") {
            guard let parsed = credentials(rest[..<at]) else { return nil }
            (user, password) = parsed
            rest = rest[rest.index(after: at)...]
        }
        guard let (host, port) = hostAndPort(rest) else { return nil }
        return RedisEndpoint(host: host, port: port, user: user, password: password, database: database)
    }

    /// A URL's userinfo, percent-decoded: `user:password`, `:password`, or a lone password
    /// (`redis://secret@host`, as redis-cli reads it); `user:` names the user without a password
    /// (given by `cluster-redis-password-file`).
    static func credentials(_ text: Substring) -> (user: String?, password: String?)? {
        guard let colon = text.firstIndex(of: ":") else {
            guard let decoded = percentDecoded(text) else { return nil }
            return (nil, decoded)
        }
        guard let name = percentDecoded(text[..<colon]),
            let password = percentDecoded(text[text.index(after: colon)...])
        else { return nil }
        return (name.isEmpty ? nil : name, password.isEmpty ? nil : password)
    }

    /// coturn's connection string: space-separated `key=value` pairs (`ip` or `host`, `port`,
    /// `dbname` or `database`, `password`, `user`); unknown keys such as `connect_timeout` are ignored.
    public static func parseStatsDB(_ text: String) -> RedisEndpoint? {
        var endpoint = RedisEndpoint(host: "127.0.0.1")
        let unquoted = text.trimmingQuotes
        for pair in unquoted.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
            guard let eq = pair.firstIndex(of: "=") else { return nil }
            let key = pair[..<eq].lowercased()
            let value = String(pair[pair.index(after: eq)...])
            switch key {
            case "ip", "host":
                guard !value.isEmpty else { return nil }
                endpoint.host = value
            case "port":
                guard let n = Int(value), (1...65535).contains(n) else { return nil }
                endpoint.port = n
            case "dbname", "database", "db":
                guard let n = Int(value), (0...65535).contains(n) else { return nil }
                endpoint.database = n
            case "password": endpoint.password = value.isEmpty ? nil : value
            case "user", "username": endpoint.user = value.isEmpty ? nil : value
            default: continue
            }
        }
        return endpoint
    }

    static func hostAndPort(_ text: Substring, defaultPort: Int = 6379) -> (String, Int)? {
        var host: Substring
        var portText: Substring? = nil
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = text.firstIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        } else {
            host = text
        }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "/" || $0 == "@" }) else { return nil }
        var port = defaultPort
        if let portText {
            guard let n = Int(portText), (1...65535).contains(n) else { return nil }
            port = n
        }
        return (String(host), port)
    }

    private static func percentDecoded(_ text: Substring) -> String? {
        QueryString.decode(text, plusIsSpace: false)
    }
}

extension String {
    /// The text without one pair of surrounding double quotes (coturn's config writes the
    /// connection string quoted).
    fileprivate var trimmingQuotes: Substring {
        if count >= 2, hasPrefix("\""), hasSuffix("\"") { return dropFirst().dropLast() }
        return Substring(self)
    }
}
