import Relay
import StunCodec
import Testing

/// The cluster's configuration keys (docs/cluster.md): errors name file, line and key and never
/// echo a password; the summary masks it.
@Suite struct ClusterConfigTests {
    static let file = "conf/relayd.conf"

    @Test("cluster-redis, node-name, node-labels, cluster-total-quota and cluster-node-ttl are read")
    func keys() throws {
        let c = try RelayConfiguration.load(
            fileText: """
                no-auth
                cluster-redis=redis://relay:pw@10.0.0.9:6380/2
                node-name=relay-eu-1
                node-labels=region=eu-west,zone=a
                cluster-total-quota=5000
                cluster-node-ttl=4
                """, fileName: Self.file
        ).configuration
        #expect(c.clusterRedis == RedisEndpoint(host: "10.0.0.9", port: 6380, user: "relay", password: "pw", database: 2))
        #expect(c.nodeName == "relay-eu-1")
        #expect(c.nodeLabels.map(\.description) == ["region=eu-west", "zone=a"])
        #expect(c.clusterTotalQuota == 5000 && c.clusterNodeTTL == 4)
        let summary = c.redactedSummary()
        #expect(summary.contains { $0.key == "cluster-redis" && $0.value == "redis://relay:***@10.0.0.9:6380/2" })
        #expect(!summary.contains { $0.value.contains("pw@") })
    }

    @Test("coturn's redis-statsdb sets the same Redis")
    func statsDB() throws {
        let c = try RelayConfiguration.load(
            fileText: "no-auth\nredis-statsdb=\"ip=127.0.0.1 dbname=1 password=pw port=6379 connect_timeout=30\"\n",
            fileName: Self.file
        ).configuration
        #expect(c.clusterRedis == RedisEndpoint(host: "127.0.0.1", port: 6379, password: "pw", database: 1))
    }

    @Test(
        "Bad values name file, line and key, without the password",
        arguments: [
            ("cluster-redis=http://u:hunter2@h", "cluster-redis"),
            ("cluster-redis=redis://u:hunter2@h:99999", "cluster-redis"),
            ("redis-statsdb=ip=h port=x password=hunter2", "redis-statsdb"),
            ("node-labels=region", "node-labels"),
            ("node-name=a b", "node-name"),
            ("cluster-node-ttl=1", "cluster-node-ttl"),
        ])
    func badValues(line: String, key: String) {
        let error = #expect(throws: ConfigError.self) {
            try RelayConfiguration.load(fileText: "realm=x\n\(line)\n", fileName: Self.file)
        }
        #expect(error?.key == key)
        #expect(error?.description.hasPrefix("\(Self.file):2: key '\(key)'") == true, "\(error?.description ?? "")")
        #expect(error?.description.contains("hunter2") == false)
    }

    @Test("check-config warns about a cluster without a shared secret, and a cluster quota without a cluster")
    func advice() {
        var c = RelayConfiguration()
        c.ltCredMech = true
        c.users = [.init(name: "u", credential: .password("p"))]
        c.clusterRedis = RedisEndpoint(host: "10.0.0.9")
        let loopback: [IPAddress] = [.ipv4Loopback]
        #expect(ConfigAdvisor.warnings(for: c, interfaceAddresses: loopback).contains { $0.hasPrefix("cluster-redis without static-auth-secret") })
        c.staticAuthSecrets = ["s"]
        #expect(!ConfigAdvisor.warnings(for: c, interfaceAddresses: loopback).contains { $0.contains("cluster") })
        c.clusterRedis = nil
        c.clusterTotalQuota = 10
        #expect(ConfigAdvisor.warnings(for: c, interfaceAddresses: loopback).contains { $0.hasPrefix("cluster-total-quota is set") })
    }
}
