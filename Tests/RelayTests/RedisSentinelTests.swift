@testable import Relay
import Testing

/// `redis+sentinel://` URLs and the sentinels' answers (docs/cluster.md, "Redis that survives
/// its failover"): what the URL holds, what is refused, what is printed, and which replies are
/// taken as a master's address.
@Suite struct RedisSentinelTests {
    @Test("A sentinel URL: several sentinels, default port 26379, the master's name, credentials and database")
    func sentinelURL() throws {
        let endpoint = try #require(
            RedisEndpoint.parseURL("redis+sentinel://relay:p%40ss@10.0.0.1,10.0.0.2:26380,[fd00::3]/relayd-master/2"))
        let sentinel = try #require(endpoint.sentinel)
        #expect(
            sentinel.sentinels == [
                .init(host: "10.0.0.1", port: 26379), .init(host: "10.0.0.2", port: 26380), .init(host: "fd00::3", port: 26379),
            ])
        #expect(sentinel.masterName == "relayd-master")
        #expect(sentinel.user == nil && sentinel.password == nil, "sentinels borrow the master's credentials")
        #expect(endpoint.user == "relay" && endpoint.password == "p@ss" && endpoint.database == 2)
        let direct = endpoint.direct(host: "10.0.0.7", port: 6380)
        #expect(direct == RedisEndpoint(host: "10.0.0.7", port: 6380, user: "relay", password: "p@ss", database: 2))
        #expect(direct.sentinel == nil)
    }

    @Test("Sentinels' own credentials come from the query; a database is optional")
    func sentinelCredentials() throws {
        let endpoint = try #require(
            RedisEndpoint.parseURL("redis+sentinel://:pw@h:1/m?sentinel-user=watch&sentinel-password=s%26cret"))
        #expect(endpoint.sentinel?.user == "watch")
        #expect(endpoint.sentinel?.password == "s&cret")
        #expect(endpoint.password == "pw" && endpoint.database == 0)
        #expect(RedisEndpoint.parseURL("redis+sentinel://h/m/")?.database == 0)
    }

    @Test("Malformed sentinel URLs are refused", arguments: [
        "redis+sentinel://h", "redis+sentinel://h/", "redis+sentinel://h/m/x", "redis+sentinel://h/m/1/2",
        "redis+sentinel://h:0/m", "redis+sentinel://h,/m", "redis+sentinel://,h/m", "redis+sentinel:///m",
        "redis+sentinel://h/m?other=1", "redis+sentinel://h/m?sentinel-password", "redis+sentinel://h/a%20b",
    ])
    func malformed(url: String) {
        #expect(RedisEndpoint.parseURL(url) == nil)
    }

    @Test("The printed form masks both passwords and names every sentinel")
    func printed() throws {
        let endpoint = try #require(
            RedisEndpoint.parseURL("redis+sentinel://u:hunter2@a:1,[::1]:2/m/3?sentinel-user=w&sentinel-password=x9y8"))
        let text = endpoint.description
        #expect(!text.contains("hunter2") && !text.contains("x9y8"))
        #expect(text == "redis+sentinel://u:***@a:1,[::1]:2/m/3?sentinel-user=w&sentinel-password=***")
    }

    @Test("Only a two-element [host, port] reply is a master's address; ROLE says master or not")
    func replies() {
        #expect(
            RedisSentinel.address(.array([.string(Array("10.0.0.5".utf8)), .string(Array("6380".utf8))]))
                == .init(host: "10.0.0.5", port: 6380))
        #expect(RedisSentinel.address(.null) == nil, "a name the sentinel does not monitor")
        for bad: RedisReply in [
            .array([.string(Array("h".utf8))]), .array([.string(Array("h".utf8)), .string(Array("0".utf8))]),
            .array([.string([]), .string(Array("1".utf8))]), .array([.string(Array("a b".utf8)), .string(Array("1".utf8))]),
            .array([.integer(1), .integer(2)]), .error("ERR"),
        ] {
            #expect(RedisSentinel.address(bad) == nil, "\(bad)")
        }
        #expect(RedisSentinel.isMaster(.array([.string(Array("master".utf8)), .integer(0), .array([])])))
        #expect(!RedisSentinel.isMaster(.array([.string(Array("slave".utf8)), .string(Array("h".utf8))])))
        #expect(!RedisSentinel.isMaster(.error("NOPERM")))
    }
}
