/// What the HTTP service reads of the cluster agent (both on the main thread): the fleet for the
/// credential service, and the state and counters for `/metrics`.
public struct ClusterSnapshot: Sendable {
    public var nodeName: String
    public var redisUp: Bool
    /// Nil while Redis is away: the credential service then names this node alone.
    public var fleet: ClusterFleet?
    var counters: ClusterCounters

    /// The cluster's metric families (docs/cluster.md), appended to `/metrics` in a cluster.
    func prometheus() -> String {
        var p = PrometheusText()
        p.family("relayd_cluster_redis_up", .gauge, help: "1 while the cluster's Redis answers, else 0.")
        p.sample("relayd_cluster_redis_up", [], redisUp ? 1 : 0)
        p.family("relayd_cluster_nodes", .gauge, help: "Live nodes in the cluster registry, this one included.")
        p.sample("relayd_cluster_nodes", [], UInt64(fleet?.nodes.count ?? 0))
        p.family(
            "relayd_cluster_admissions_total", .counter,
            help: "Allocates checked against the quotas counted across the cluster, by outcome.")
        p.sample("relayd_cluster_admissions_total", [("outcome", "granted")], counters.granted)
        p.sample("relayd_cluster_admissions_total", [("outcome", "refused")], counters.refused)
        p.sample("relayd_cluster_admissions_total", [("outcome", "local")], counters.local)
        p.family("relayd_cluster_redis_errors_total", .counter, help: "Error replies from the cluster's Redis.")
        p.sample("relayd_cluster_redis_errors_total", [], counters.errors)
        return p.text
    }
}
