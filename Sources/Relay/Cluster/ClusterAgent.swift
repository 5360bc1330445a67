import CLibevent
import Glibc
import Logging
import RelayCore

/// The node's side of the cluster (docs/cluster.md), on the main thread's libevent loop: it
/// publishes this node's registry entry to Redis, reads the fleet back, and keeps the cluster
/// admission ledger's view current (Redis up, the other nodes); the ledger itself sends the
/// quota share and the quota checks over the agent's connection. Nothing here runs on a loop
/// thread, and no loop ever waits on Redis: a quota check that Redis does not answer in time is
/// decided on the node's own counts.
final class ClusterAgent {
    /// What the server tells the agent about itself at each heartbeat.
    struct Status {
        var allocations: Int
        /// Cumulative, for the rates.
        var relayedPackets: UInt64
        var relayedBytes: UInt64
        var draining: Bool
    }

    let name: String
    let ttlMillis: Int
    let connection: RedisConnection
    let ledger: ClusterAdmissionLedger
    /// The cluster's blocks, kept in step with Redis (docs/admin.md, "Blocks that last").
    var blocks: ClusterBlocks?
    /// The SHA-256 of the API's certificate the entry publishes (a reload may renew it).
    var apiSHA256: String {
        get { template.apiSHA256 }
        set { template.apiSHA256 = newValue }
    }
    private let logger: Logger
    private let base: OpaquePointer
    private var template: NodeRecord
    private let status: () -> Status
    private var ticker: LoopEvent?
    private var wake: OpaquePointer?
    private var ticks = 0
    private var previous: (status: Status, cpu: Double, at: Int64)?
    /// The fleet as last read; nil while Redis is away (the credential service then names only
    /// this node).
    private(set) var fleet: ClusterFleet?
    /// Whether Redis was up at the last transition logged (nil before the first).
    private var loggedUp: Bool?
    /// Error replies to the registry's commands (the ledger counts its own).
    private var errors: UInt64 = 0
    /// The admission counters with this agent's errors.
    var counters: ClusterCounters {
        var counters = ledger.counters
        counters.errors += errors
        return counters
    }

    init(
        name: String, record: NodeRecord, endpoint: RedisEndpoint, ttlSeconds: Int, base: OpaquePointer,
        ledger: ClusterAdmissionLedger, logger: Logger,
        status: @escaping () -> Status
    ) {
        self.name = name
        template = record
        ttlMillis = ttlSeconds * 1000
        connection = RedisConnection(endpoint: endpoint, base: base)
        self.base = base
        self.ledger = ledger
        self.logger = logger
        self.status = status
    }

    func start() {
        connection.onUp = { [unowned self] in redisUp() }
        connection.onDown = { [unowned self] reason in redisDown(reason) }
        connection.onMaster = { [unowned self] master in
            logger.notice(
                "cluster: the sentinels name \(master) as the Redis master",
                metadata: ["event": "cluster_redis_master", "master": "\(master)"])
        }
        let event = event_new(base, -1, 0, ClusterAgent.woken, Unmanaged.passUnretained(self).toOpaque())!
        wake = event
        ledger.attach(event)
        ticker = LoopEvent(base: base, every: timeval(tv_sec: 0, tv_usec: 100_000)) { [unowned self] in tick() }
        connection.start()
    }

    func stop(leaving: Bool = true) {
        ledger.detach()
        if let wake { event_free(wake) }
        wake = nil
        ticker = nil
        let wasUp = connection.state == .up
        connection.close()
        // Leave the registry now rather than after the TTL, so no credential or redirect names a
        // node that is gone. The loop no longer runs: a blocking connection, 200 ms at most.
        guard wasUp, leaving else { return }
        do {
            // The master last connected to, rather than asking the sentinels again.
            let endpoint = connection.master.map { connection.endpoint.direct(host: $0.host, port: $0.port) }
            let client = try RedisBlockingClient(endpoint ?? connection.endpoint, timeout: timeval(tv_sec: 0, tv_usec: 200_000))
            _ = try client.command(["DEL", ClusterKeys.node(name), ClusterKeys.quota(name)], what: "leaving")
            _ = try client.command(["SREM", ClusterKeys.registry, name], what: "leaving")
            logger.info("cluster: node \(name) left", metadata: ["event": "cluster_left", "node": "\(name)"])
        } catch {
            logger.warning(
                "cluster: could not leave the registry (\(error.description)); the entry expires in \(ttlMillis / 1000) s",
                metadata: ["event": "cluster_leave_failed"])
        }
    }

    private static let woken: event_callback_fn = { _, _, arg in
        let agent = Unmanaged<ClusterAgent>.fromOpaque(arg!).takeUnretainedValue()
        agent.ledger.admitQueued(agent.share)
    }

    // MARK: Redis up and down

    private func redisUp() {
        ledger.update(redisUp: true)
        if loggedUp != true {
            logger.notice(
                "cluster: Redis reachable, node \(name) joined",
                metadata: ["event": "cluster_redis_up", "redis": "\(connection.endpoint)", "node": "\(name)"])
            loggedUp = true
        }
        // Redis may have lost this node's share or kept an old one: write it anew.
        ledger.replaceShare(share)
        blocks?.connectionUp()
        heartbeat()
    }

    /// This node's quota share in Redis, for the ledger.
    var share: ClusterAdmissionLedger.RedisShare {
        ClusterAdmissionLedger.RedisShare(connection: connection, node: name, ttlMillis: ttlMillis) {
            [weak self] reply, what in self?.check(reply, doing: what)
        }
    }

    private func redisDown(_ reason: String) {
        ledger.update(redisUp: false)
        ledger.update(alternates: [])
        fleet = nil
        if loggedUp != false {
            logger.warning(
                "cluster: Redis unreachable (\(reason)); relaying on, quotas counted on this node alone",
                metadata: ["event": "cluster_redis_down", "redis": "\(connection.endpoint)", "reason": "\(reason)"])
            loggedUp = false
        }
    }

    private func check(_ reply: RedisReply?, doing what: String) {
        guard let message = reply?.errorMessage else { return }
        errors += 1
        logger.warning("cluster: Redis refused \(what): \(message)", metadata: ["event": "cluster_redis_error"])
    }

    // MARK: Heartbeat

    private func tick() {
        ticks += 1
        guard connection.state == .up else { return }
        ledger.flushDeltas(share)
        blocks?.tick(connection)
        if ticks % 10 == 0 { heartbeat() }
    }

    /// Writes this node's entry and renews its share's TTL, then reads the fleet back.
    private func heartbeat() {
        let record = currentRecord()
        var hset = ["HSET", ClusterKeys.node(name)]
        for (field, value) in record.fields { hset += [field, value] }
        let ttl = String(ttlMillis)
        connection.send(["MULTI"])
        connection.send(["DEL", ClusterKeys.node(name)])
        connection.send(hset)
        connection.send(["PEXPIRE", ClusterKeys.node(name), ttl])
        connection.send(["SADD", ClusterKeys.registry, name])
        connection.send(["PEXPIRE", ClusterKeys.quota(name), ttl])
        connection.send(["EXEC"]) { [weak self] reply in
            guard let self else { return }
            self.check(reply, doing: "the heartbeat")
            // PEXPIRE of the share answered 0: Redis lost it (eviction, FLUSHDB) while this node
            // still counts allocations; write it anew.
            if let results = reply?.elements, results.count == 6, results[4].integer == 0, self.ledger.local.total > 0 {
                self.ledger.replaceShare(self.share)
            }
        }
        connection.send(["EVAL", ClusterKeys.readFleet, "1", ClusterKeys.registry, ClusterKeys.nodePrefix, "1"]) {
            [weak self] reply in
            guard let self, let entries = reply?.elements else { return self?.check(reply, doing: "reading the fleet") ?? () }
            let nodes = entries.compactMap { entry in
                entry.elements.flatMap { NodeRecord(fields: $0.compactMap(\.text)) }
            }
            let fleet = ClusterFleet(nodes: nodes.sorted { $0.name < $1.name })
            self.fleet = fleet
            self.ledger.update(alternates: fleet.alternates(excluding: self.name))
        }
    }

    private func currentRecord() -> NodeRecord {
        var record = template
        let now = RedisConnection.nowMillis()
        let current = status()
        let cpu = ProcessMetrics.cpuSeconds()
        record.allocations = current.allocations
        record.draining = current.draining
        if let previous, now > previous.at {
            let seconds = Double(now - previous.at) / 1000
            func rate(_ now: UInt64, _ then: UInt64) -> Int {
                now > then ? Int(min(Double(now - then) / seconds, Double(Int64.max / 2))) : 0
            }
            record.packetsPerSecond = rate(current.relayedPackets, previous.status.relayedPackets)
            record.bytesPerSecond = rate(current.relayedBytes, previous.status.relayedBytes)
            let cores = Double(max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))))
            record.cpuPercent = min(100, max(0, (cpu - previous.cpu) / seconds / cores * 100))
        }
        previous = (current, cpu, now)
        return record
    }
}
