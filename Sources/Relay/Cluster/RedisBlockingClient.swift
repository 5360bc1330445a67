import CHiredis
import Glibc

/// A blocking connection to Redis with a timeout, for what runs outside the event loop or must
/// finish before the process exits: `relayd cluster status`, and a node leaving the registry at
/// shutdown (docs/cluster.md). With sentinels, it asks them for the master first.
final class RedisBlockingClient {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private let context: UnsafeMutablePointer<redisContext>

    /// Connects to `endpoint`, or to the master its sentinels name (checked with `ROLE`), then
    /// authenticates and selects the database, each step within `timeout`.
    convenience init(_ endpoint: RedisEndpoint, timeout: timeval) throws(Failure) {
        guard let sentinel = endpoint.sentinel else {
            try self.init(direct: endpoint, timeout: timeout)
            return
        }
        let master = try sentinel.master(credentials: endpoint, timeout: timeout)
        try self.init(direct: endpoint.direct(host: master.host, port: master.port), timeout: timeout)
        let role = try command(["ROLE"], what: "ROLE", refusalThrows: false)
        guard !RedisSentinel.refusesRole(role) else {
            throw Failure(description: "\(master), named master by the sentinels, is not a master (a failover is under way)")
        }
    }

    /// Connects to the server at `endpoint`'s host and port. With `authOptional`, a refused `AUTH`
    /// is not an error: the commands then run unauthenticated (a sentinel asked with the master's
    /// credentials may have no password set; one that needs a password answers `NOAUTH`).
    init(direct endpoint: RedisEndpoint, timeout: timeval, authOptional: Bool = false) throws(Failure) {
        guard let context = redisConnectWithTimeout(endpoint.host, Int32(endpoint.port), timeout) else {
            throw Failure(description: "cannot reach Redis at \(endpoint): out of memory")
        }
        self.context = context
        if context.pointee.err != 0 {
            throw Failure(description: "cannot reach Redis at \(endpoint): \(errorText)")
        }
        redisSetTimeout(context, timeout)
        if let password = endpoint.password {
            do {
                _ = try command(endpoint.user.map { ["AUTH", $0, password] } ?? ["AUTH", password], what: "AUTH")
            } catch where authOptional {}
        }
        if endpoint.database != 0 { _ = try command(["SELECT", String(endpoint.database)], what: "SELECT") }
    }

    deinit { redisFree(context) }

    /// One command and its reply; an error reply throws, with Redis's words.
    func command(_ arguments: [String], what: String, refusalThrows: Bool = true) throws(Failure) -> RedisReply {
        let context = self.context
        let raw = withRedisArgv(arguments.map { Array($0.utf8) }) { argc, argv, lengths in
            redisCommandArgv(context, argc, argv, lengths)
        }
        guard let raw else { throw Failure(description: "\(what): \(errorText)") }
        defer { freeReplyObject(raw) }
        let reply = RedisReply(raw.assumingMemoryBound(to: redisReply.self))
        if refusalThrows, let message = reply.errorMessage { throw Failure(description: "\(what) refused: \(message)") }
        return reply
    }

    private var errorText: String {
        withUnsafeBytes(of: context.pointee.errstr) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}
