import ArgumentParser
import Foundation
import Relay

/// `relayd cluster status [-c conf | --redis URL] [--json]`: the fleet as the registry in Redis
/// shows it (docs/cluster.md).
struct Cluster: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Inspect the cluster that relayd nodes sharing one Redis form.",
        subcommands: [Status.self])

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the live nodes: state, load, labels and addresses (a table, or JSON with --json).",
            discussion: """
                Reads the registry from Redis directly, so it works while any node is down. The Redis comes \
                from --redis, else from the configuration's cluster-redis (or redis-statsdb).
                """)

        @Option(name: [.customShort("c"), .customLong("config")], help: "relayd.conf naming cluster-redis.")
        var config: String?

        @Option(help: "redis://[user:password@]host[:port][/db] (overrides the configuration).")
        var redis: String?

        @Flag(help: "Print JSON instead of a table.")
        var json = false

        func run() throws {
            var endpoint: RedisEndpoint? = nil
            if let redis {
                guard let parsed = RedisEndpoint.parseURL(redis) else {
                    throw ValidationError("--redis: expected 'redis://[user:password@]host[:port][/db]'")
                }
                endpoint = parsed
            } else if let config {
                endpoint = try LoadedConfiguration.load(["-c", config]).configuration.clusterRedis
            }
            guard let endpoint else {
                throw ValidationError("no Redis: give --redis, or -c with a configuration that sets cluster-redis")
            }
            do {
                let fleet = try ClusterStatusQuery.fetch(endpoint)
                print(json ? fleet.json() : fleet.table(), terminator: json ? "\n" : "")
            } catch {
                FileHandle.standardError.write(Data("relayd cluster status: \(error.description)\n".utf8))
                throw ExitCode(1)
            }
        }
    }
}
