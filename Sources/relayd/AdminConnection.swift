import ArgumentParser
import Foundation
import Relay
import StunCodec

/// How `relayd sessions`, `kick` and `block` reach the admin API (docs/admin.md): from the
/// configuration (`-c`: the API's address, its first admin key, its own certificate to trust),
/// or from `--api` and `--token` / `RELAYD_API_TOKEN`.
struct AdminConnection: ParsableArguments {
    @Option(name: [.customShort("c"), .customLong("config")], help: "relayd.conf: where the API listens, and an admin api-key.")
    var config: String?

    @Option(help: "The API's base URL, e.g. https://turn.example.com:8443 (default: from -c, else http://127.0.0.1:8080).")
    var api: String?

    @Option(help: "An admin api-key's token (default: RELAYD_API_TOKEN, else the first admin api-key in -c).")
    var token: String?

    @Option(help: "Trust the CAs in this PEM file for an https API.")
    var cacert: String?

    @Flag(help: "Do not verify the API's TLS certificate.")
    var insecure = false

    @Flag(help: "With -c naming a cluster: ask only this node, not every node of the cluster.")
    var thisNode = false

    /// The token: --token, RELAYD_API_TOKEN, else the first admin api-key of -c.
    func chosenToken(configured: String?) throws -> String {
        let environment = ProcessInfo.processInfo.environment["RELAYD_API_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        guard let chosen = token ?? environment ?? configured else {
            throw ValidationError("no admin token: give --token, set RELAYD_API_TOKEN, or -c a configuration with api-key=name:token:admin")
        }
        return chosen
    }

    /// Every live node of the cluster `-c` joins, with a client for its admin API (docs/admin.md,
    /// "A fleet"); nil when the command acts on one node: no `-c`, no `cluster-redis` in it,
    /// `--api`, or `--this-node`. Each node's certificate is pinned by the SHA-256 it publishes
    /// in the registry, unless `--cacert` (then its host is checked) or `--insecure`.
    func fleet() throws -> [FleetNode]? {
        guard let config, api == nil, !thisNode else { return nil }
        let c = try LoadedConfiguration.load(["-c", config]).configuration
        guard let redis = c.clusterRedis else { return nil }
        let token = try chosenToken(configured: c.apiKeys.first { $0.scope == .admin }?.token)
        let registry: ClusterFleet
        do {
            registry = try ClusterStatusQuery.fetch(redis)
        } catch {
            throw ValidationError("cannot read the cluster's registry: \(error.description) (--this-node asks only this node)")
        }
        return registry.nodes.map { node in
            guard var endpoint = APIClient.Endpoint(url: node.api) else {
                return FleetNode(name: node.name, client: nil, problem: "publishes no reachable API endpoint")
            }
            // The admin token never crosses a network in clear, and never goes to a certificate
            // nothing vouches for.
            let loopback = IPAddress(endpoint.host)?.isLoopback ?? (endpoint.host == "localhost")
            if !endpoint.tls && !loopback && !insecure {
                return FleetNode(
                    name: node.name, client: nil,
                    problem: "its API (\(node.api)) is plain HTTP beyond loopback: the admin token would cross the network in clear (set api-tls on the nodes, or --insecure)")
            }
            if let cacert {
                endpoint.caFile = cacert
            } else if endpoint.tls && !node.apiSHA256.isEmpty {
                endpoint.pinnedSHA256 = node.apiSHA256
            } else if endpoint.tls && !insecure {
                return FleetNode(
                    name: node.name, client: nil,
                    problem: "publishes no certificate digest to pin (give --cacert to check its certificate instead)")
            }
            endpoint.insecure = insecure
            var client = APIClient(endpoint: endpoint, token: token)
            client.timeoutSeconds = 5
            return FleetNode(name: node.name, client: client, problem: nil)
        }
    }

    func client() throws -> APIClient {
        var endpoint = APIClient.Endpoint(host: "127.0.0.1", port: 8080, tls: false)
        var configuredToken: String? = nil
        if let config {
            let c = try LoadedConfiguration.load(["-c", config]).configuration
            let ip = c.apiListeningIP
            let host = ip == .ipv4Any ? "127.0.0.1" : ip == .ipv6Any ? "::1" : "\(ip)"
            endpoint = APIClient.Endpoint(host: host, port: c.apiListeningPort, tls: c.apiUsesTLS)
            if c.apiUsesTLS { endpoint.pinnedCertificate = c.apiCert ?? c.cert }
            configuredToken = c.apiKeys.first { $0.scope == .admin }?.token
        }
        if let api {
            guard let parsed = APIClient.Endpoint(url: api) else {
                throw ValidationError("--api: expected http://host:port or https://host:port")
            }
            endpoint = parsed
        }
        if let cacert {
            endpoint.caFile = cacert
            endpoint.pinnedCertificate = nil
        }
        endpoint.insecure = insecure
        return APIClient(endpoint: endpoint, token: try chosenToken(configured: configuredToken))
    }

    /// Sends the request; a non-2xx answer ends the command with the API's message.
    func call(
        _ command: String, _ method: String, _ path: String, body: String? = nil, timeoutSeconds: Int? = nil
    ) throws -> String {
        let response: APIClient.Response
        do {
            var client = try client()
            if let timeoutSeconds { client.timeoutSeconds = timeoutSeconds }
            response = try client.send(method, path, body: body)
        } catch let failure as APIClient.Failure {
            fail(command, failure.description)
        }
        guard (200..<300).contains(response.status) else {
            let message = (try? JSONDecoder().decode(APIErrorBody.self, from: Data(response.body.utf8)))?.message
            fail(command, "HTTP \(response.status): \(message ?? response.body)")
        }
        return response.body
    }

    func fail(_ command: String, _ message: String) -> Never {
        FileHandle.standardError.write(Data("relayd \(command): \(message)\n".utf8))
        Foundation.exit(1)
    }

    struct APIErrorBody: Decodable {
        var message: String
    }

    /// A path segment or query value, percent-encoded.
    static func encode(_ text: String) -> String {
        // RFC 3986 §2.3's unreserved set, ASCII only: every other byte is percent-encoded.
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
