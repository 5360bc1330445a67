/// Redis Sentinel, Redis's own high availability (docs/cluster.md, "Redis that survives its
/// failover"): a set of sentinels watches one master and its replicas under a name, promotes a
/// replica when the master fails, and tells clients where the master is now. relayd asks them
/// (`SENTINEL get-master-addr-by-name`), checks that the server it reaches says `ROLE` master,
/// and asks again whenever the connection is lost or a write is refused as `READONLY`.
///
/// Written as `redis+sentinel://[user:password@]host[:port][,host[:port]…]/master-name[/db]`
/// with optional `?sentinel-user=…&sentinel-password=…`: the userinfo is the master's `AUTH`;
/// sentinels get the `sentinel-` credentials when given, and the master's otherwise (a sentinel
/// that has no password set is then asked without one).
public struct RedisSentinel: Sendable, Equatable {
    public struct Address: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// Sentinels' default port.
    public static let defaultPort = 26379

    /// The sentinels, asked in this order.
    public var sentinels: [Address]
    /// The name the sentinels monitor the master under (`sentinel monitor <name> …`).
    public var masterName: String
    /// The sentinels' own ACL user and password; nil: the master's.
    public var user: String?
    public var password: String?

    public init(sentinels: [Address], masterName: String, user: String? = nil, password: String? = nil) {
        self.sentinels = sentinels
        self.masterName = masterName
        self.user = user
        self.password = password
    }

    static let scheme = "redis+sentinel://"

    /// Parses what follows `redis+sentinel://`; the master's credentials and database go into
    /// `master`. Nil when anything is malformed.
    static func parse(_ text: Substring, into master: inout RedisEndpoint) -> RedisSentinel? {
        var rest = text
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        let path = rest[rest.index(after: slash)...].split(separator: "/", omittingEmptySubsequences: false)
        rest = rest[..<slash]
        guard (1...2).contains(path.count), let name = QueryString.decode(path[0], plusIsSpace: false),
            !name.isEmpty, !name.contains(where: { $0 == " " || $0.isNewline })
        else { return nil }
        if path.count == 2, !path[1].isEmpty {
            guard let n = Int(path[1]), (0...65535).contains(n) else { return nil }
            master.database = n
        }
        if let at = rest.lastIndex(of: "@") {
            guard let (user, password) = RedisEndpoint.credentials(rest[..<at]) else { return nil }
            master.user = user
            master.password = password
            rest = rest[rest.index(after: at)...]
        }
        var sentinels: [Address] = []
        for item in rest.split(separator: ",", omittingEmptySubsequences: false) {
            guard let (host, port) = RedisEndpoint.hostAndPort(item, defaultPort: defaultPort) else { return nil }
            sentinels.append(Address(host: host, port: port))
        }
        guard !sentinels.isEmpty else { return nil }
        var sentinel = RedisSentinel(sentinels: sentinels, masterName: name)
        for pair in query.split(separator: "&") where !pair.isEmpty {
            guard let eq = pair.firstIndex(of: "="),
                let value = QueryString.decode(pair[pair.index(after: eq)...], plusIsSpace: false)
            else { return nil }
            switch pair[..<eq] {
            case "sentinel-user": sentinel.user = value.isEmpty ? nil : value
            case "sentinel-password": sentinel.password = value.isEmpty ? nil : value
            default: return nil
            }
        }
        // Host and port name the first sentinel, for completeness only: every connection of a
        // sentinel endpoint goes through discovery (`master(credentials:timeout:)`).
        master.host = sentinels[0].host
        master.port = sentinels[0].port
        return sentinel
    }

    /// The URL with every password masked.
    func description(master: RedisEndpoint) -> String {
        var text = Self.scheme
        text += RedisEndpoint.maskedUserinfo(user: master.user, password: master.password)
        text += sentinels.map(\.description).joined(separator: ",")
        text += "/\(masterName)/\(master.database)"
        var query: [String] = []
        if let user { query.append("sentinel-user=\(user)") }
        if password != nil { query.append("sentinel-password=\(RelayConfiguration.redaction)") }
        if !query.isEmpty { text += "?" + query.joined(separator: "&") }
        return text
    }
}
