import RelayCore

/// What the cluster ledger tells Redis and asks it (docs/cluster.md), on the main thread over
/// the agent's connection: this node's share of the quotas (written anew when Redis comes up,
/// changes sent every tick) and the admit script for each queued Allocate.
extension ClusterAdmissionLedger {
    /// Where this node's share lives in Redis, and how errors are reported.
    struct RedisShare {
        let connection: RedisConnection
        let node: String
        let ttlMillis: Int
        /// Counts and logs an error reply (the agent's `check`).
        let check: (RedisReply?, String) -> Void
    }

    /// Writes this node's quota share from its own exact counts.
    func replaceShare(_ redis: RedisShare) {
        let share = local.snapshotForMirror()
        var arguments = ["EVAL", ClusterKeys.replaceShare, "1", ClusterKeys.quota(redis.node), String(redis.ttlMillis)]
        if share.total > 0 { arguments += [ClusterKeys.totalField, String(share.total)] }
        for (user, count) in share.perUser where count > 0 { arguments += [ClusterKeys.userField(user), String(count)] }
        redis.connection.send(arguments) { reply in redis.check(reply, "writing the quota share") }
    }

    /// Tells Redis what changed in this node's counts since the last time.
    func flushDeltas(_ redis: RedisShare) {
        let deltas = local.takeDeltas()
        guard !deltas.isEmpty else { return }
        var arguments = ["EVAL", ClusterKeys.applyDeltas, "1", ClusterKeys.quota(redis.node), String(redis.ttlMillis)]
        if deltas.total != 0 { arguments += [ClusterKeys.totalField, String(deltas.total)] }
        for (user, delta) in deltas.perUser { arguments += [ClusterKeys.userField(user), String(delta)] }
        redis.connection.send(arguments) { reply in redis.check(reply, "updating the quota share") }
    }

    /// Runs the admit script for every queued Allocate; each is settled when Redis answers (on
    /// the node's own counts when it cannot).
    func admitQueued(_ redis: RedisShare) {
        let requests = takeQueued()
        guard !requests.isEmpty else { return }
        guard redis.connection.state == .up else {
            for request in requests { settle(request, redisAnswer: nil) }
            return
        }
        // The share must be current before Redis sums it.
        flushDeltas(redis)
        let totalQuota = String(clusterTotalQuota)
        for request in requests {
            let userQuota = String(local.userQuota(ofTenant: request.tenant))
            let sent = redis.connection.send([
                "EVAL", ClusterKeys.admit, "1", ClusterKeys.registry, ClusterKeys.quotaPrefix, redis.node,
                ClusterKeys.userField(request.user), userQuota, totalQuota, String(redis.ttlMillis),
            ]) { [weak self] reply in
                guard let self else { return }
                let answer = reply?.integer.map(Int.init).flatMap { (0...2).contains($0) ? $0 : nil }
                if answer == nil { redis.check(reply, "a quota check") }
                self.settle(request, redisAnswer: answer)
            }
            if !sent { settle(request, redisAnswer: nil) }
        }
    }
}
