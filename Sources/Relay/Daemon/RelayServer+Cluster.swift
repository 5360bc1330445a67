import Glibc
import RelayCore

extension RelayServer {
    /// Joins the cluster when `cluster-redis` is set (docs/cluster.md): the agent runs on the
    /// main loop beside the HTTP service, which reads the fleet from it. `name` replaces the
    /// node's name (a process that handed over in a live upgrade).
    func startCluster(base: OpaquePointer, http: HTTPService, name: String? = nil) {
        guard let endpoint = configuration.clusterRedis, let ledger = clusterLedger else { return }
        let name = name ?? ClusterNode.name(configuration: configuration)
        let record = ClusterNode.record(
            name: name, configuration: configuration, interfaceAddresses: interfaceAddresses, startedAt: startedAt)
        let agent = ClusterAgent(
            name: name, record: record, endpoint: endpoint, ttlSeconds: configuration.clusterNodeTTL, base: base,
            ledger: ledger, logger: logger
        ) { [unowned self] in
            let c = metrics.total().counters
            return ClusterAgent.Status(
                allocations: admission.total, relayedPackets: c.packetsToPeer &+ c.packetsToClient,
                relayedBytes: c.bytesToPeer &+ c.bytesToClient, draining: drain.active || handover.done)
        }
        http.router.cluster = { [unowned agent] in
            ClusterSnapshot(
                nodeName: agent.name, redisUp: agent.connection.state == .up, fleet: agent.fleet,
                counters: agent.counters)
        }
        blocks.clustered = true
        agent.blocks = ClusterBlocks(store: blocks, logger: logger)
        clusterAgent = agent
        agent.start()
        logger.info(
            "cluster: joining",
            metadata: [
                "event": "cluster_joining", "node": "\(name)", "redis": "\(endpoint)",
                "labels": "\(configuration.nodeLabels.map(\.description).joined(separator: ","))",
                "ttl_s": "\(configuration.clusterNodeTTL)",
            ])
    }

    /// The name a process that handed over goes on under in the cluster while it drains, so its
    /// quota share and the heir's, published under the node's name, are both counted
    /// (docs/live-upgrade.md, "Cluster").
    static func handedOverName(_ name: String, pid: pid_t) -> String {
        let suffix = "/upgraded-\(pid)"
        return String(decoding: name.utf8.prefix(64 - suffix.utf8.count), as: UTF8.self) + suffix
    }

    /// Stops the agent; `leaving` false keeps the node's entry and quota share in Redis, for the
    /// heir of a live upgrade that publishes them under the same name (docs/live-upgrade.md).
    func stopCluster(leaving: Bool = true) {
        http?.router.cluster = nil
        clusterAgent?.stop(leaving: leaving)
        clusterAgent = nil
    }
}
