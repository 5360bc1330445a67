import CHiredis
import Glibc
import StunCodec

/// One connection to the cluster's Redis through hiredis's async API, driven by a libevent loop
/// (the main thread's): commands never block, replies arrive as callbacks on that loop. It
/// authenticates (`AUTH`), selects the database, reconnects after a loss, and gives up on a
/// Redis that stops answering (a reply later than `replyTimeout`), so a hung Redis looks like a
/// gone one (docs/cluster.md). With sentinels (`RedisSentinel`), each attempt first asks them
/// where the master is and checks its `ROLE`. While up, it asks them again every second: a
/// failover that leaves the old master running (a manual one, or a partition) lets it take
/// writes for seconds before it is demoted, so a new name ends the connection at once, as does
/// a write refused as `READONLY`.
final class RedisConnection {
    enum State: Equatable {
        /// No connection; the next attempt is due at `retryAt`.
        case down
        /// TCP connecting or handshaking (AUTH, SELECT, PING).
        case connecting
        /// Answering commands.
        case up
    }

    let endpoint: RedisEndpoint
    private let base: OpaquePointer
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    private(set) var state = State.down
    /// When each command still waiting for its reply was sent, oldest first (CLOCK_MONOTONIC ms).
    private var sentAt: [Int64] = []
    private var sentHead = 0
    private var retryAt: Int64 = 0
    private var ticker: LoopEvent?
    private let resolver = HostResolver()
    private var resolving = false
    /// The master the sentinels last named.
    private(set) var master: RedisSentinel.Address?
    /// A reply said `READONLY`: the server is a replica now; the next tick drops the connection.
    private var demoted = false
    /// Asks the sentinels, while up, whether the master is still the same.
    private let watcher = HostResolver()
    private var watchAt: Int64 = 0
    /// Between two such questions (ms).
    let watchInterval: Int64 = 1000

    /// A reply slower than this ends the connection (ms).
    let replyTimeout: Int64
    /// Between connection attempts (ms).
    let retryInterval: Int64 = 500

    /// Called when the connection is up (handshake done) and when it is lost, with why.
    var onUp: (() -> Void)?
    var onDown: ((String) -> Void)?
    /// Called when the sentinels name a master other than the last one (and the first time).
    var onMaster: ((RedisSentinel.Address) -> Void)?

    init(endpoint: RedisEndpoint, base: OpaquePointer, replyTimeout: Int64 = 1000) {
        self.endpoint = endpoint
        self.base = base
        self.replyTimeout = replyTimeout
    }

    /// Starts connecting, and checks every 100 ms for a late reply or a due reconnection.
    func start() {
        ticker = LoopEvent(base: base, every: timeval(tv_sec: 0, tv_usec: 100_000)) { [unowned self] in tick() }
        connect()
    }

    /// Drops the connection for good (pending replies get nil).
    func close() {
        ticker = nil
        onUp = nil
        onDown = nil
        onMaster = nil
        if let context {
            self.context = nil
            relayd_redis_set_data(context, nil)
            redisAsyncFree(context)
        }
        state = .down
    }

    deinit { close() }

    /// Sends one command; `reply` runs on the loop with the answer, or nil when the connection is
    /// lost first. Returns false (and never calls `reply`) when Redis is not up.
    @discardableResult
    func send(_ arguments: [String], reply: ((RedisReply?) -> Void)? = nil) -> Bool {
        send(arguments.map { Array($0.utf8) }, reply: reply)
    }

    @discardableResult
    func send(_ arguments: [[UInt8]], reply: ((RedisReply?) -> Void)? = nil) -> Bool {
        guard state == .up else { return false }
        return issue(arguments, reply: reply)
    }

    private func issue(_ arguments: [[UInt8]], reply: ((RedisReply?) -> Void)?) -> Bool {
        guard let context else { return false }
        let box = Unmanaged.passRetained(ReplyBox(reply)).toOpaque()
        let status = withRedisArgv(arguments) { argc, argv, lengths in
            redisAsyncCommandArgv(context, RedisConnection.replied, box, argc, argv, lengths)
        }
        guard status == REDIS_OK else {
            Unmanaged<ReplyBox>.fromOpaque(box).release()
            return false
        }
        sentAt.append(Self.nowMillis())
        return true
    }

    private final class ReplyBox {
        let reply: ((RedisReply?) -> Void)?
        init(_ reply: ((RedisReply?) -> Void)?) { self.reply = reply }
    }

    private static let replied: @convention(c) (UnsafeMutablePointer<redisAsyncContext>?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { context, reply, privdata in
        let box = Unmanaged<ReplyBox>.fromOpaque(privdata!).takeRetainedValue()
        let answer = reply.map { RedisReply($0.assumingMemoryBound(to: redisReply.self)) }
        if let context, let raw = relayd_redis_get_data(context) {
            let connection = Unmanaged<RedisConnection>.fromOpaque(raw).takeUnretainedValue()
            connection.replyArrived()
            if answer?.errorMessage?.hasPrefix("READONLY") == true { connection.demoted = true }
        }
        box.reply?(answer)
    }

    private func replyArrived() {
        if sentHead < sentAt.count { sentHead += 1 }
        if sentHead == sentAt.count {
            sentAt.removeAll(keepingCapacity: true)
            sentHead = 0
        }
    }

    /// Resolves a host name off the loop first (`HostResolver`); an address connects at once.
    /// With sentinels, asks them first, off the loop.
    private func connect() {
        guard context == nil else { return }
        if let sentinel = endpoint.sentinel {
            resolver.start(sentinel, credentials: endpoint)
        } else if IPAddress(endpoint.host) != nil {
            return connect(to: endpoint.host, port: endpoint.port)
        } else {
            resolver.start(endpoint.host)
        }
        state = .connecting
        resolving = true
    }

    private func resolved(_ outcome: HostResolver.Outcome) {
        resolving = false
        switch outcome {
        case .address(let address): connect(to: address, port: endpoint.port)
        case .master(let address, let port, let named):
            if named != master {
                master = named
                onMaster?(named)
            }
            connect(to: address, port: port)
        case .failure(let reason): lost(reason)
        }
    }

    private func connect(to address: String, port: Int) {
        guard context == nil, let raw = redisAsyncConnect(address, Int32(port)) else { return }
        if relayd_redis_async_error(raw) != 0 {
            let reason = String(cString: relayd_redis_async_errstr(raw))
            redisAsyncFree(raw)
            lost("cannot connect: \(reason)")
            return
        }
        context = raw
        state = .connecting
        relayd_redis_set_data(raw, Unmanaged.passUnretained(self).toOpaque())
        relayd_redis_attach(raw, UnsafeMutableRawPointer(base))
        redisAsyncSetConnectCallback(raw, RedisConnection.connected)
        redisAsyncSetDisconnectCallback(raw, RedisConnection.disconnected)
        // The handshake is queued now and sent once TCP connects; PING's answer means ready.
        var handshake: [[String]] = []
        if let password = endpoint.password {
            handshake.append(endpoint.user.map { ["AUTH", $0, password] } ?? ["AUTH", password])
        }
        if endpoint.database != 0 { handshake.append(["SELECT", String(endpoint.database)]) }
        // The sentinels' answer may be stale (a failover under way): the server must say master.
        if endpoint.sentinel != nil { handshake.append(["ROLE"]) }
        handshake.append(["PING"])
        var failure: String? = nil
        for (i, command) in handshake.enumerated() {
            let last = i == handshake.count - 1
            let name = command[0]
            _ = issue(command.map { Array($0.utf8) }) { [weak self] reply in
                guard let self, self.state == .connecting else { return }
                if name == "ROLE" {
                    if let reply, RedisSentinel.refusesRole(reply), failure == nil {
                        failure = "\(address):\(port), named master by the sentinels, is not a master (a failover is under way)"
                    }
                } else if let message = reply?.errorMessage, failure == nil {
                    // Redis's own words ("WRONGPASS …", "NOAUTH …"): never the password.
                    failure = "\(name) refused: \(message)"
                }
                guard last else { return }
                if let failure {
                    self.drop(failure)
                } else if reply != nil {
                    self.state = .up
                    self.onUp?()
                }
            }
        }
    }

    private static let connected: @convention(c) (UnsafePointer<redisAsyncContext>?, Int32) -> Void = { context, status in
        guard status != REDIS_OK, let context, let raw = relayd_redis_get_data(context) else { return }
        let connection = Unmanaged<RedisConnection>.fromOpaque(raw).takeUnretainedValue()
        // hiredis fills the async context's errstr only after this callback: the connection's own has it.
        let reason = String(cString: relayd_redis_connection_errstr(context))
        // hiredis frees the context after this callback; nothing may reach us through it.
        relayd_redis_set_data(UnsafeMutablePointer(mutating: context), nil)
        connection.context = nil
        connection.lost("cannot connect: \(reason)")
    }

    private static let disconnected: @convention(c) (UnsafePointer<redisAsyncContext>?, Int32) -> Void = { context, status in
        guard let context, let raw = relayd_redis_get_data(context) else { return }
        let connection = Unmanaged<RedisConnection>.fromOpaque(raw).takeUnretainedValue()
        let reason = status == REDIS_OK ? "connection closed" : String(cString: relayd_redis_async_errstr(context))
        connection.context = nil
        connection.lost(reason.isEmpty ? "connection lost" : reason)
    }

    /// Ends the connection on our side (late replies, a refused handshake).
    private func drop(_ reason: String) {
        guard let context else { return }
        self.context = nil
        relayd_redis_set_data(context, nil)
        // Pending callbacks run with a nil reply; the disconnect callback no longer finds us.
        redisAsyncFree(context)
        lost(reason)
    }

    private func lost(_ reason: String) {
        state = .down
        demoted = false
        // A question still out names the master of the connection just lost: not an answer.
        watcher.cancel()
        sentAt.removeAll()
        sentHead = 0
        retryAt = Self.nowMillis() + retryInterval
        onDown?(reason)
    }

    private func tick() {
        let now = Self.nowMillis()
        switch state {
        case .down:
            if context == nil && now >= retryAt { connect() }
        case .connecting, .up:
            if demoted {
                demoted = false
                return drop("a write was refused as READONLY: the server is a replica now")
            }
            if resolving {
                if let outcome = resolver.take() { resolved(outcome) }
                return
            }
            if sentHead < sentAt.count && now - sentAt[sentHead] > replyTimeout {
                return drop("no reply within \(replyTimeout) ms")
            }
            if state == .up, let sentinel = endpoint.sentinel { watch(sentinel, now: now) }
        }
    }

    /// A master the sentinels now name instead of ours ends the connection; the next attempt
    /// connects to it. A question they do not answer changes nothing.
    private func watch(_ sentinel: RedisSentinel, now: Int64) {
        if case .master(_, _, let named) = watcher.take(), named != master {
            return drop("the sentinels name \(named) as the master now")
        }
        guard now >= watchAt else { return }
        watchAt = now + watchInterval
        watcher.start(sentinel, credentials: endpoint)
    }

    static func nowMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
