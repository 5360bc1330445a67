@testable import Relay
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The cluster's pieces that need no Redis (docs/cluster.md): where Redis is, labels, registry
/// entries, the choice of nodes for credentials and redirects.
@Suite struct ClusterRegistryTests {
    @Test("cluster-redis URLs: host, port, ACL user, percent-encoded password, database, IPv6")
    func redisURLs() {
        #expect(RedisEndpoint.parseURL("redis://10.0.0.9") == RedisEndpoint(host: "10.0.0.9"))
        #expect(
            RedisEndpoint.parseURL("redis://relay:p%40ss%3Aword@redis.internal:6380/3")
                == RedisEndpoint(host: "redis.internal", port: 6380, user: "relay", password: "p@ss:word", database: 3))
        #expect(RedisEndpoint.parseURL("redis://:secret@127.0.0.1:7000")?.password == "secret")
        #expect(RedisEndpoint.parseURL("redis://:a+b%2B@h")?.password == "a+b+", "a '+' is a '+' in a URL's userinfo")
        #expect(RedisEndpoint.parseURL("redis://:secret@127.0.0.1:7000")?.user == nil)
        #expect(RedisEndpoint.parseURL("redis://onlypassword@h")?.password == "onlypassword")
        #expect(RedisEndpoint.parseURL("redis://[::1]:6379/0")?.host == "::1")
        for bad in ["http://h", "redis://", "redis://h:0", "redis://h:70000", "redis://h/x", "redis://h:p", "redis://[::1"] {
            #expect(RedisEndpoint.parseURL(bad) == nil, "\(bad)")
        }
    }

    @Test("coturn's redis-statsdb names the same Redis; quotes and unknown keys are fine")
    func statsDB() {
        #expect(
            RedisEndpoint.parseStatsDB("\"ip=10.1.2.3 dbname=2 password=pw port=6390 connect_timeout=30\"")
                == RedisEndpoint(host: "10.1.2.3", port: 6390, password: "pw", database: 2))
        #expect(RedisEndpoint.parseStatsDB("port=x") == nil)
        #expect(RedisEndpoint.parseStatsDB("nonsense") == nil)
    }

    @Test("The printed form never shows the password")
    func redaction() {
        let endpoint = RedisEndpoint(host: "h", port: 1, user: "u", password: "hunter2")
        #expect(!endpoint.description.contains("hunter2"))
        #expect(endpoint.description == "redis://u:\(RelayConfiguration.redaction)@h:1/0")
    }

    @Test("node-labels: key=value pairs, comma-separated, each key once, safe characters only")
    func labels() {
        #expect(
            NodeLabel.parseList("region=eu-west, zone=a")
                == [NodeLabel(key: "region", value: "eu-west"), NodeLabel(key: "zone", value: "a")])
        for bad in ["region", "region=", "=x", "a=b,a=c", "a=b c", "a=b;rm"] {
            #expect(NodeLabel.parseList(bad) == nil, "\(bad)")
        }
    }

    static func node(_ name: String, allocations: Int, labels: [NodeLabel] = [], draining: Bool = false) -> NodeRecord {
        var record = NodeRecord(name: name)
        record.allocations = allocations
        record.labels = labels
        record.draining = draining
        record.turnURIs = ["turn:\(name):3478?transport=udp"]
        record.stunURIs = ["stun:\(name):3478"]
        record.addresses = [.literal("192.0.2.\(allocations + 1):3478")]
        return record
    }

    @Test("A registry entry reads back as written; unknown fields are ignored")
    func recordRoundTrip() {
        var record = Self.node("n1", allocations: 7, labels: [NodeLabel(key: "region", value: "eu")])
        record.tlsPort = 5349
        record.bytesPerSecond = 1200
        record.cpuPercent = 12.5
        record.version = "0.1.0"
        record.startedAt = 1_790_000_000
        record.addresses.append(.literal("[2001:db8::1]:3478"))
        let flat = record.fields.flatMap { [$0.0, $0.1] } + ["future_field", "x"]
        #expect(NodeRecord(fields: flat) == record)
        #expect(NodeRecord(fields: ["allocations", "3"]) == nil, "an entry without a name is not a node")
    }

    @Test("Credentials name the best nodes: not draining, preferred labels first, then least loaded")
    func bestNodes() {
        let eu = NodeLabel(key: "region", value: "eu")
        let fleet = ClusterFleet(nodes: [
            Self.node("a", allocations: 5),
            Self.node("b", allocations: 1),
            Self.node("c", allocations: 9, labels: [eu]),
            Self.node("d", allocations: 0, draining: true),
        ])
        #expect(fleet.best(count: 2, preferring: []).map(\.name) == ["b", "a"])
        #expect(fleet.best(count: 2, preferring: [eu]).map(\.name) == ["c", "b"])
        #expect(fleet.best(count: 16, preferring: []).map(\.name) == ["b", "a", "c"])
        #expect(fleet.alternates(excluding: "b").map(\.name) == ["a", "c"])
    }

    @Test("The credential service hands out the chosen nodes' URIs; without a fleet, its own")
    func credentialURIs() throws {
        var c = RelayConfiguration()
        c.useAuthSecret = true
        c.staticAuthSecrets = ["s"]
        c.listeningIPs = [.literal("203.0.113.1")]
        let service = CredentialService(configuration: c)
        let fleet = ClusterFleet(nodes: [Self.node("a", allocations: 5), Self.node("b", allocations: 1)])
        let request = try CredentialRequest.fromQuery("user=alice&nodes=1", separator: ":")
        #expect(service.issue(request, now: 0, fleet: fleet)?.uris.turn == ["turn:b:3478?transport=udp"])
        #expect(service.issue(request, now: 0)?.uris.turn.first == "turn:203.0.113.1:3478?transport=udp")
        // Every node draining: the node's own URIs rather than none.
        let draining = ClusterFleet(nodes: [Self.node("a", allocations: 0, draining: true)])
        #expect(service.issue(request, now: 0, fleet: draining)?.uris == service.uris)
    }

    @Test("Credential requests: nodes=1...16, other parameters are labels to prefer")
    func requestParameters() throws {
        let request = try CredentialRequest.fromQuery("user=a&region=eu-west&nodes=3&zone=b", separator: ":")
        #expect(request.nodes == 3)
        #expect(request.labels == [NodeLabel(key: "region", value: "eu-west"), NodeLabel(key: "zone", value: "b")])
        for bad in ["user=a&nodes=0", "user=a&nodes=17", "user=a&nodes=x"] {
            #expect(throws: CredentialRequest.Invalid.invalidNodes) { try CredentialRequest.fromQuery(bad, separator: ":") }
        }
        let posted = try CredentialRequest.fromJSON(
            Array(#"{"user":"a","nodes":2,"labels":{"region":"eu"}}"#.utf8), separator: ":")
        #expect(posted.nodes == 2 && posted.labels == [NodeLabel(key: "region", value: "eu")])
    }

    @Test("The fleet prints as a table and as JSON")
    func printing() {
        let fleet = ClusterFleet(nodes: [Self.node("a", allocations: 2, labels: [NodeLabel(key: "region", value: "eu")])])
        let table = fleet.table()
        #expect(table.hasPrefix("NODE"))
        #expect(table.contains("a     serving  2"))
        #expect(fleet.json().hasPrefix(#"{"nodes":[{"name":"a","labels":{"region":"eu"}"#))
        #expect(fleet.json().contains(#""draining":false"#))
    }

    @Test("Redis host names resolve off the event loop: localhost to a loopback address, nonsense to an error")
    func resolver() {
        switch HostResolver.resolve("localhost") {
        case .address(let text): #expect(text == "127.0.0.1" || text == "::1", "\(text)")
        case .failure(let reason): Issue.record("localhost did not resolve: \(reason)")
        case let other: Issue.record("a host name resolved to \(other)")
        }
        if case .address(let text) = HostResolver.resolve("no-such-host.invalid") {
            Issue.record("an .invalid name resolved to \(text)")
        }
    }
}
