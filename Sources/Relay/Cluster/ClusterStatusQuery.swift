import Glibc

/// `relayd cluster status`: reads the registry straight from Redis (blocking, with a timeout),
/// so it works from any machine that reaches Redis, whichever nodes are up (docs/cluster.md).
public enum ClusterStatusQuery {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The live nodes, sorted by name. Read-only: names whose entry expired are skipped, not
    /// removed (the nodes' agents tidy the registry).
    public static func fetch(_ endpoint: RedisEndpoint, timeoutSeconds: Int = 3) throws(Failure) -> ClusterFleet {
        let reply: RedisReply
        do {
            let client = try RedisBlockingClient(endpoint, timeout: timeval(tv_sec: timeoutSeconds, tv_usec: 0))
            reply = try client.command(
                ["EVAL", ClusterKeys.readFleet, "1", ClusterKeys.registry, ClusterKeys.nodePrefix, "0"],
                what: "reading the registry")
        } catch {
            throw Failure(description: error.description)
        }
        let nodes = (reply.elements ?? []).compactMap { entry in
            entry.elements.flatMap { NodeRecord(fields: $0.compactMap(\.text)) }
        }
        return ClusterFleet(nodes: nodes.sorted { $0.name < $1.name })
    }
}

extension ClusterFleet {
    /// The fleet as a table, one node a line.
    public func table() -> String {
        let header = ["NODE", "STATE", "ALLOCATIONS", "PACKETS/S", "BYTES/S", "CPU%", "LABELS", "ADDRESSES"]
        let rows = nodes.map { n in
            [
                n.name, n.draining ? "draining" : "serving", String(n.allocations), String(n.packetsPerSecond),
                String(n.bytesPerSecond), String(n.cpuPercent), n.labels.map(\.description).joined(separator: ","),
                n.addresses.map(\.description).joined(separator: " "),
            ]
        }
        var widths = header.map(\.count)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, cell in
                i == cells.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count)
            }.joined(separator: "  ")
        }
        return ([line(header)] + rows.map(line)).joined(separator: "\n") + "\n"
    }

    /// The fleet as JSON: `{"nodes": [...]}`, each node with every registry field.
    public func json() -> String {
        var w = JSONWriter()
        w.object { o in
            o.key("nodes")
            o.array { a in
                for n in nodes {
                    a.object { e in
                        e.field("name", n.name)
                        e.key("labels")
                        e.object { l in for label in n.labels { l.field(label.key, label.value) } }
                        e.field("stun", strings: n.stunURIs)
                        e.field("turn", strings: n.turnURIs)
                        e.field("addresses", strings: n.addresses.map(\.description))
                        if let tls = n.tlsPort { e.field("tls_port", Int(tls)) }
                        e.field("allocations", n.allocations)
                        e.field("packets_per_second", n.packetsPerSecond)
                        e.field("bytes_per_second", n.bytesPerSecond)
                        e.key("cpu_percent")
                        e.raw(String(n.cpuPercent))
                        e.key("draining")
                        e.raw(n.draining ? "true" : "false")
                        e.field("version", n.version)
                        e.field("started", Int(n.startedAt))
                        e.field("api", n.api)
                        e.field("api_sha256", n.apiSHA256)
                    }
                }
            }
        }
        return w.text
    }
}
