import RelayCore
import StunCodec

/// One node's entry in the cluster registry (docs/cluster.md): a Redis hash
/// `relayd:node:<name>` the node rewrites about every second, with a TTL of `cluster-node-ttl`.
public struct NodeRecord: Sendable, Equatable {
    public var name: String
    public var labels: [NodeLabel] = []
    /// The `stun:`/`stuns:` and `turn:`/`turns:` URIs its credential service hands out.
    public var stunURIs: [String] = []
    public var turnURIs: [String] = []
    /// Where clients reach it over UDP and TCP (at most one per family), for ALTERNATE-SERVER.
    public var addresses: [TransportAddress] = []
    public var tlsPort: UInt16? = nil
    public var allocations = 0
    public var packetsPerSecond = 0
    public var bytesPerSecond = 0
    /// CPU the process used over the last interval, in percent of the whole machine.
    public var cpuPercent = 0.0
    public var draining = false
    public var version = ""
    /// Unix time the node started.
    public var startedAt: Int64 = 0
    /// The admin API's base URL, and the SHA-256 of its certificate (lowercase hex; empty for
    /// plain HTTP): what the CLI's fleet commands reach and pin (`NodeAPIEndpoint`).
    public var api = ""
    public var apiSHA256 = ""

    public init(name: String) { self.name = name }

    /// HSET's field/value pairs.
    public var fields: [(String, String)] {
        [
            ("name", name),
            ("labels", labels.map(\.description).joined(separator: ",")),
            ("stun", stunURIs.joined(separator: " ")),
            ("turn", turnURIs.joined(separator: " ")),
            ("addresses", addresses.map(\.description).joined(separator: " ")),
            ("tls_port", tlsPort.map { String($0) } ?? ""),
            ("allocations", String(allocations)),
            ("packets_per_second", String(packetsPerSecond)),
            ("bytes_per_second", String(bytesPerSecond)),
            ("cpu_percent", String(Double(Int(cpuPercent * 10)) / 10)),
            ("draining", draining ? "1" : "0"),
            ("version", version),
            ("started", String(startedAt)),
            ("api", api),
            ("api_sha256", apiSHA256),
        ]
    }

    /// From HGETALL's flat field/value list; nil without a name. Unknown fields are ignored and
    /// unreadable values left at their defaults, so nodes of other versions still show.
    public init?(fields flat: [String]) {
        var map: [String: String] = [:]
        var i = 0
        while i + 1 < flat.count {
            map[flat[i]] = flat[i + 1]
            i += 2
        }
        // A name as `node-name` allows: nothing a terminal or a page would take for markup.
        guard let name = map["name"], !name.isEmpty, name.utf8.count <= 64,
            name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil || "-_./".unicodeScalars.contains($0)) })
        else { return nil }
        self.name = name
        labels = map["labels"].flatMap { $0.isEmpty ? [] : NodeLabel.parseList($0) } ?? []
        stunURIs = Self.words(map["stun"])
        turnURIs = Self.words(map["turn"])
        addresses = Self.words(map["addresses"]).compactMap { TransportAddress($0) }
        tlsPort = map["tls_port"].flatMap { UInt16($0) }
        allocations = map["allocations"].flatMap { Int($0) } ?? 0
        packetsPerSecond = map["packets_per_second"].flatMap { Int($0) } ?? 0
        bytesPerSecond = map["bytes_per_second"].flatMap { Int($0) } ?? 0
        cpuPercent = map["cpu_percent"].flatMap { Double($0) } ?? 0
        draining = map["draining"] == "1"
        version = map["version"] ?? ""
        startedAt = map["started"].flatMap { Int64($0) } ?? 0
        // Only a URL the API client reads and a well-formed digest are kept: the CLI connects
        // to what the registry says.
        if let url = map["api"], url.utf8.count <= 300, APIClient.Endpoint(url: url) != nil { api = url }
        if let digest = map["api_sha256"], digest.utf8.count == 64,
            digest.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
        {
            apiSHA256 = digest
        }
    }

    private static func words(_ text: String?) -> [String] {
        (text ?? "").split(separator: " ").map(String.init)
    }

    /// How many of `wanted` this node carries.
    public func matches(_ wanted: [NodeLabel]) -> Int {
        wanted.reduce(0) { $0 + (labels.contains($1) ? 1 : 0) }
    }

    /// Least loaded first: allocations, then relayed bytes, then CPU, then name (a stable order).
    public static func lessLoaded(_ a: NodeRecord, _ b: NodeRecord) -> Bool {
        if a.allocations != b.allocations { return a.allocations < b.allocations }
        if a.bytesPerSecond != b.bytesPerSecond { return a.bytesPerSecond < b.bytesPerSecond }
        if a.cpuPercent != b.cpuPercent { return a.cpuPercent < b.cpuPercent }
        return a.name < b.name
    }
}

/// The live nodes as last read from Redis, shared by the main thread's agent and HTTP service.
public struct ClusterFleet: Sendable, Equatable {
    public var nodes: [NodeRecord]

    public init(nodes: [NodeRecord]) { self.nodes = nodes }

    /// The nodes a caller should use, best first (docs/cluster.md): not draining, most of the
    /// wanted labels, least loaded; at most `count`.
    public func best(count: Int, preferring wanted: [NodeLabel]) -> [NodeRecord] {
        let candidates = nodes.filter { !$0.draining }
        let ranked = candidates.sorted { a, b in
            let (ma, mb) = (a.matches(wanted), b.matches(wanted))
            if ma != mb { return ma > mb }
            return NodeRecord.lessLoaded(a, b)
        }
        return Array(ranked.prefix(max(0, count)))
    }

    /// Other live nodes that can take a redirected client, least loaded first.
    func alternates(excluding name: String) -> [ClusterAdmissionLedger.Alternate] {
        nodes.filter { $0.name != name && !$0.draining && !$0.addresses.isEmpty }
            .sorted(by: NodeRecord.lessLoaded)
            .map { ClusterAdmissionLedger.Alternate(name: $0.name, addresses: $0.addresses, tlsPort: $0.tlsPort) }
    }
}
