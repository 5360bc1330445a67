import Glibc
import RelayCore
import StunCodec

/// How this node presents itself to the cluster (docs/cluster.md).
enum ClusterNode {
    /// `node-name`, else the host name.
    static func name(configuration c: RelayConfiguration) -> String {
        if let name = c.nodeName { return name }
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "relayd" }
        let host = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return NodeLabel.isToken(host) ? host : "relayd"
    }

    /// The registry entry's parts that do not change while the node runs.
    static func record(
        name: String, configuration c: RelayConfiguration, interfaceAddresses: [IPAddress], startedAt: Int64
    ) -> NodeRecord {
        var record = NodeRecord(name: name)
        record.labels = c.nodeLabels
        let uris = ICEServerURIs(configuration: c, interfaceAddresses: interfaceAddresses)
        record.stunURIs = uris.stun
        record.turnURIs = uris.turn
        if !(c.noUDP && c.noTCP) {
            record.addresses = [IPAddress.Family.ipv4, .ipv6].compactMap { family in
                clientAddress(family: family, configuration: c, interfaceAddresses: interfaceAddresses)
                    .map { TransportAddress(ip: $0, port: c.listeningPort) }
            }
        }
        if !c.noTLS && c.cert != nil { record.tlsPort = c.tlsListeningPort }
        record.version = String(RelaydVersion.string.split(separator: " ").last ?? "")
        record.startedAt = startedAt
        // The API on the node's own address, never an external-ip's public one: behind 1:1 NAT
        // the API port stays closed to the Internet.
        var own = c.listeningIPs.first { $0 != .ipv4Any && $0 != .ipv6Any }
        own = own ?? interfaceAddresses.first { !$0.isLoopback && $0 != .ipv4Any && $0 != .ipv6Any }
        own = own ?? interfaceAddresses.first
        record.api = NodeAPIEndpoint.url(configuration: c, clientAddress: own) ?? ""
        record.apiSHA256 = NodeAPIEndpoint.certificatePath(configuration: c).flatMap(NodeAPIEndpoint.fingerprint) ?? ""
        return record
    }

    /// Where clients of `family` reach this node, for another node's ALTERNATE-SERVER: its
    /// `external-ip` public address, else a `listening-ip` that is not a wildcard, else an
    /// interface address (not loopback, unless there is nothing else).
    static func clientAddress(
        family: IPAddress.Family, configuration c: RelayConfiguration, interfaceAddresses: [IPAddress]
    ) -> IPAddress? {
        if let external = c.externalIPs.first(where: { $0.publicIP.family == family }) { return external.publicIP }
        let wildcard: IPAddress = family == .ipv4 ? .ipv4Any : .ipv6Any
        let listening = c.listeningIPs.filter { $0.family == family }
        if let specific = listening.first(where: { $0 != wildcard }) { return specific }
        // Listening on every address (or on none of this family, when listening-ip names others).
        guard c.listeningIPs.isEmpty || listening.contains(wildcard) else { return nil }
        let usable = interfaceAddresses.filter { $0.family == family && $0 != wildcard }
        return usable.first { !$0.isLoopback } ?? usable.first
    }

    /// The nonce key every node of a cluster shares, so a client redirected with ALTERNATE-SERVER
    /// keeps its nonce (Chromium sends its next Allocate to the new node with the old nonce and
    /// does not recover from a 438 there): derived from the first `static-auth-secret`, which the
    /// nodes share for REST credentials anyway. Nil without one.
    static func sharedNonceKey(configuration c: RelayConfiguration) -> [UInt8]? {
        guard c.clusterRedis != nil, let secret = c.staticAuthSecrets.first else { return nil }
        return DigestAlgorithm.sha256.hmac(key: Array(secret.utf8), message: Array("relayd cluster nonce key".utf8))
    }
}
