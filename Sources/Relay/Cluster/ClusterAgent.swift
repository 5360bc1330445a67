import CLibevent
import Glibc
import Logging
import RelayCore

/// The node's side of the cluster (docs/cluster.md), on the main thread's libevent loop: it
/// publishes this node's registry entry and quota share to Redis, reads the fleet back, answers
/// the loops' quota checks, and keeps `ClusterLink` current for the cores. Nothing here runs on
/// a loop thread, and no loop ever waits on Redis: a quota check that Redis does not answer in
/// time is decided on the node's own counts.
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
    let link: ClusterLink
    let quota: QuotaTracker
    let inbox: AdmissionInbox
    private let mailboxes: [LoopMailbox]
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
    private(set) var counters = ClusterCounters()

    init(
        name: String, record: NodeRecord, endpoint: RedisEndpoint, ttlSeconds: Int, base: OpaquePointer,
        link: ClusterLink, quota: QuotaTracker, mailboxes: [LoopMailbox], inbox: AdmissionInbox, logger: Logger,
        status: @escaping () -> Status
    ) {
        self.name = name
        template = record
        ttlMillis = ttlSeconds * 1000
        connection = RedisConnection(endpoint: endpoint, base: base)
        self.base = base
        self.link = link
        self.quota = quota
        self.mailboxes = mailboxes
        self.inbox = inbox
        self.logger = logger
        self.status = status
    }

    func start() {
        quota.startMirroring()
        connection.onUp = { [unowned self] in redisUp() }
        connection.onDown = { [unowned self] reason in redisDown(reason) }
        let event = event_new(base, -1, 0, ClusterAgent.woken, Unmanaged.passUnretained(self).toOpaque())!
        wake = event
        inbox.attach(event)
        ticker = LoopEvent(base: base, every: timeval(tv_sec: 0, tv_usec: 100_000)) { [unowned self] in tick() }
        connection.start()
    }

    func stop() {
        inbox.detach()
        if let wake { event_free(wake) }
        wake = nil
        ticker = nil
        for request in inbox.take() { answer(request, .local) }
        let wasUp = connection.state == .up
        connection.close()
        link.update(redisUp: false)
        // Leave the registry now rather than after the TTL, so no credential or redirect names a
        // node that is gone. The loop no longer runs: a blocking connection, 200 ms at most.
        guard wasUp else { return }
        do {
            let client = try RedisBlockingClient(connection.endpoint, timeout: timeval(tv_sec: 0, tv_usec: 200_000))
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
        Unmanaged<ClusterAgent>.fromOpaque(arg!).takeUnretainedValue().admitPending()
    }

    // MARK: Redis up and down

    private func redisUp() {
        link.update(redisUp: true)
        if loggedUp != true {
            logger.notice(
                "cluster: Redis reachable, node \(name) joined",
                metadata: ["event": "cluster_redis_up", "redis": "\(connection.endpoint)", "node": "\(name)"])
            loggedUp = true
        }
        // Redis may have lost this node's share or kept an old one: write it anew.
        replaceShare()
        heartbeat()
    }

    /// Writes this node's quota share from its own exact counts.
    private func replaceShare() {
        let share = quota.snapshotForMirror()
        var arguments = ["EVAL", ClusterKeys.replaceShare, "1", ClusterKeys.quota(name), String(ttlMillis)]
        if share.total > 0 { arguments += [ClusterKeys.totalField, String(share.total)] }
        for (user, count) in share.perUser where count > 0 { arguments += [ClusterKeys.userField(user), String(count)] }
        connection.send(arguments) { [weak self] reply in self?.check(reply, doing: "writing the quota share") }
    }

    private func redisDown(_ reason: String) {
        link.update(redisUp: false)
        link.update(alternates: [])
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
        counters.errors += 1
        logger.warning("cluster: Redis refused \(what): \(message)", metadata: ["event": "cluster_redis_error"])
    }

    // MARK: Heartbeat

    private func tick() {
        ticks += 1
        guard connection.state == .up else { return }
        flushDeltas()
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
            if let results = reply?.elements, results.count == 6, results[4].integer == 0, self.quota.total > 0 {
                self.replaceShare()
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
            self.link.update(alternates: fleet.alternates(excluding: self.name))
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

    // MARK: Quotas

    /// Tells Redis what changed in this node's counts since the last time.
    private func flushDeltas() {
        let deltas = quota.takeDeltas()
        guard !deltas.isEmpty else { return }
        var arguments = ["EVAL", ClusterKeys.applyDeltas, "1", ClusterKeys.quota(name), String(ttlMillis)]
        if deltas.total != 0 { arguments += [ClusterKeys.totalField, String(deltas.total)] }
        for (user, delta) in deltas.perUser { arguments += [ClusterKeys.userField(user), String(delta)] }
        connection.send(arguments) { [weak self] reply in self?.check(reply, doing: "updating the quota share") }
    }

    /// Runs the quota check of every Allocate the loops posted.
    private func admitPending() {
        let requests = inbox.take()
        guard !requests.isEmpty else { return }
        guard connection.state == .up else {
            for request in requests { answer(request, .local) }
            return
        }
        // The share must be current before Redis sums it.
        flushDeltas()
        let userQuota = String(quota.userQuota)
        let totalQuota = String(link.clusterTotalQuota)
        for request in requests {
            let sent = connection.send([
                "EVAL", ClusterKeys.admit, "1", ClusterKeys.registry, ClusterKeys.quotaPrefix, name,
                ClusterKeys.userField(request.user), userQuota, totalQuota, String(ttlMillis),
            ]) { [weak self] reply in
                guard let self else { return }
                let admission: ClusterAdmission
                switch reply?.integer {
                case 0:
                    admission = .granted
                    self.quota.noteGranted(user: request.user)
                case 1: admission = .refused(.allocationQuotaReached)
                case 2: admission = .refused(.insufficientCapacity)
                default:
                    self.check(reply, doing: "a quota check")
                    admission = .local
                }
                self.answer(request, admission)
            }
            if !sent { answer(request, .local) }
        }
    }

    private func answer(_ request: AdmissionRequest, _ admission: ClusterAdmission) {
        counters.count(admission)
        guard mailboxes.indices.contains(request.thread) else { return }
        mailboxes[request.thread].post(AdmittedRequest(request: request, admission: admission))
    }
}

/// The agent's counters, for `/metrics`.
struct ClusterCounters: Sendable {
    var granted: UInt64 = 0
    var refused: UInt64 = 0
    var local: UInt64 = 0
    /// Error replies from Redis (a script or command it refused).
    var errors: UInt64 = 0

    mutating func count(_ admission: ClusterAdmission) {
        switch admission {
        case .granted: granted += 1
        case .refused: refused += 1
        case .local: local += 1
        }
    }
}
