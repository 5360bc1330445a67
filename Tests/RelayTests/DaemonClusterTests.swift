import Foundation
import Glibc
import Relay
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Two `relayd` daemons (two loop threads each) and a real redis-server on 127.0.0.1: Allocates
/// from many client sockets cross from the loops to the cluster agent and back (docs/cluster.md)
/// while `user-quota` holds across both nodes. Under ThreadSanitizer (scripts/test.sh runs the
/// suite again with it) the daemons are instrumented too, and their logs must show no report.
@Suite struct DaemonClusterTests {
    static func redisServer() -> String? {
        ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    @Test("user-quota holds across two daemons sharing a real Redis; no sanitizer report; clean exits")
    func quotaAcrossDaemons() throws {
        let relayd = try #require(DaemonIntegrationTests.relaydBinary(), "relayd is not built next to the test bundle")
        let redisBinary = try #require(Self.redisServer(), "redis-server not found (apt: redis-server)")
        let redisPort = try UDPTestSocket.freePort()
        let redis = try DaemonIntegrationTests.Daemon(
            binary: redisBinary,
            arguments: ["--port", "\(redisPort)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            configText: nil)
        defer { _ = redis.stop(signal: SIGKILL) }
        let secret = (0..<16).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.joined()
        var daemons: [DaemonIntegrationTests.Daemon] = []
        var servers: [TransportAddress] = []
        for name in ["a", "b"] {
            let port = try UDPTestSocket.freePort()
            let minPort = try DaemonIntegrationTests.freeRelayRange()
            daemons.append(
                try DaemonIntegrationTests.Daemon(
                    binary: relayd,
                    arguments: [
                        "--listening-ip=127.0.0.1", "--listening-port=\(port)", "--relay-ip=127.0.0.1",
                        "--min-port=\(minPort)", "--max-port=\(minPort + 99)", "--use-auth-secret",
                        "--static-auth-secret=\(secret)", "--realm=example.org", "--no-tcp", "--no-tls",
                        "--api-listening-port=\(try UDPTestSocket.freePort())", "--relay-threads=2",
                        "--cluster-redis=redis://127.0.0.1:\(redisPort)/0", "--node-name=\(name)", "--user-quota=3",
                        "--drain-timeout=0", "--unauth-rate-limit=100000",
                    ],
                    configText: "# relayd cluster daemon test\n"))
            servers.append(TransportAddress(ip: .ipv4Loopback, port: port))
        }
        defer { for daemon in daemons { _ = daemon.stop(signal: SIGKILL) } }

        /// One Allocate for `user` from a fresh socket (a fresh 5-tuple, any loop): its answer code.
        func allocate(_ user: String, at server: TransportAddress) throws -> (Int?, UDPTestSocket) {
            let socket = try UDPTestSocket(timeoutMilliseconds: 1500)
            let username = "\(Int64(time(nil)) + 3600):\(user)"
            let turn = TurnTestClient(
                username: username, password: KeyDerivation.restPassword(secret: secret, username: username)
            ) { request in
                try socket.exchange(request, with: server) { answer in
                    answer.count >= 20 && answer[0] < 4 && Array(answer[8..<20]) == Array(request[8..<20])
                }.map(ReceivedStun.init)
            }
            let answer = try turn.allocate()
            return (answer.isSuccess ? 0 : answer.errorCode, socket)
        }

        // Both nodes up and in the registry: until then Allocates are decided locally.
        let deadline = Date().addingTimeInterval(10)
        var joined = false
        while !joined && Date() < deadline {
            joined = daemons.allSatisfy { $0.log.contains("cluster_redis_up") || $0.log.contains("node") && $0.log.contains("joined") }
            if !joined { usleep(100_000) }
        }
        #expect(joined, "the daemons did not reach Redis:\n\(daemons.map(\.log).joined(separator: "\n---\n"))")
        usleep(1_200_000)

        var held: [UDPTestSocket] = []
        var codes: [Int?] = []
        for i in 0..<5 {
            let (code, socket) = try allocate("carol", at: servers[i % 2])
            codes.append(code)
            held.append(socket)
        }
        #expect(codes == [0, 0, 0, 486, 486], "\(codes)")
        // Other users are not affected.
        #expect(try allocate("dave", at: servers[1]).0 == 0)

        for daemon in daemons {
            #expect(daemon.stop(signal: SIGTERM), "relayd did not exit on SIGTERM")
            #expect(daemon.exitCode == 0, "exit \(String(describing: daemon.waitStatus)):\n\(daemon.log)")
            #expect(!daemon.log.contains("ThreadSanitizer"), "\(daemon.log)")
            #expect(daemon.log.contains("left"), "the node did not leave the registry:\n\(daemon.log)")
        }
        _ = held
    }
}
