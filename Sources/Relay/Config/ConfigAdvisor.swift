import RelayCore
import Foundation
import StunCodec

/// Warnings about configurations that load but are probably not what the operator meant: the
/// address mistakes that make TURN deployments fail behind NAT, quotas the port range cannot
/// serve, loopback exposed to the network, and a TLS listener without a certificate. Shown by
/// `relayd check-config` and logged at startup; never errors.
public enum ConfigAdvisor {
    /// RFC 1918, RFC 6598 (carrier-grade NAT) and RFC 4193 (unique local) ranges: addresses no
    /// client on the internet can send to.
    static let privateRanges: [(range: IPRange, name: String)] = [
        ("10.0.0.0/8", "RFC 1918"), ("172.16.0.0/12", "RFC 1918"), ("192.168.0.0/16", "RFC 1918"),
        ("100.64.0.0/10", "carrier-grade NAT, RFC 6598"), ("fc00::/7", "unique local, RFC 4193"),
    ].map { (IPRange($0.0)!, $0.1) }

    /// One sentence per likely mistake in `config`, given the host's own addresses
    /// (`InterfaceAddresses.current()`); empty when nothing looks wrong.
    public static func warnings(for config: RelayConfiguration, interfaceAddresses: [IPAddress]) -> [String] {
        let relays = relayAddresses(config, interfaceAddresses: interfaceAddresses)
        var notes: [String] = []
        if relays.isEmpty && !config.stunOnly {
            notes.append(
                "no relay address: listening-ip holds only wildcard addresses and relay-ip is not set, "
                    + "so Allocate cannot succeed (set relay-ip)")
        }
        for relay in relays {
            if let note = nonLocalRelay(relay, interfaceAddresses: interfaceAddresses) { notes.append(note) }
        }
        notes += quotaWarnings(config, relayCount: relays.count)
        notes += bandwidthWarnings(config)
        if !listensOnlyPrivately(config) {
            for relay in relays where relay.bound == relay.advertised {
                if let kind = privateKind(relay.bound) {
                    notes.append(
                        "relay address \(relay.bound) is private (\(kind)) and no external-ip maps it: clients "
                            + "on the internet cannot reach the relayed addresses handed out "
                            + "(behind 1:1 NAT set external-ip=<public>/\(relay.bound))")
                }
            }
        }
        if config.allowLoopbackPeers, let listener = nonLoopbackListener(config) {
            notes.append(
                "allow-loopback-peers is on while listening on \(listener): any client that can authenticate "
                    + "can relay to services on this host's loopback interface")
        }
        notes += tlsWarnings(config)
        if config.noAuth && !config.stunOnly {
            notes.append("no-auth without stun-only: anyone can allocate relays on this server")
        }
        notes += clusterWarnings(config)
        if let warning = plainAPIWarning(config) { notes.append(warning) }
        notes += sharedAPIWarnings(config)
        if let warning = stateDirWarning(config) { notes.append(warning) }
        if config.rfc5780Active {
            if !config.resolvingAddresses(interfaces: interfaceAddresses).hasAlternateAddress {
                notes.append(
                    "rfc5780 needs two listening-ip addresses of one family: without an alternate address "
                        + "Binding responses carry no OTHER-ADDRESS and CHANGE-REQUEST gets 420 (RFC 5780 §6)")
            }
        }
        return notes
    }

    /// The credential API reachable beyond this host without TLS: API tokens and TURN passwords
    /// would cross the network in clear.
    static func plainAPIWarning(_ config: RelayConfiguration) -> String? {
        // On TURN's port the API is served on TURN's addresses.
        let exposed =
            config.apiSharesTURNPort
            ? config.listeningIPs.first { !$0.isLoopback } : config.apiListeningIP.isLoopback ? nil : config.apiListeningIP
        guard !config.apiUsesTLS, let exposed else { return nil }
        return "the HTTP API listens on \(exposed):\(config.apiListeningPort) without TLS: API tokens "
            + "and the credentials it hands out cross the network in clear (set api-tls, or api-cert and api-pkey)"
    }

    /// Keys that do not apply when the API shares TURN's port (docs/tls.md).
    static func sharedAPIWarnings(_ config: RelayConfiguration) -> [String] {
        guard config.apiSharesTURNPort else { return [] }
        var notes: [String] = []
        if config.apiCert != nil {
            notes.append(
                "api-cert is not used: the API shares TURN's port \(config.apiListeningPort) and is served with "
                    + "TURN's certificate (cert)")
        }
        if config.apiListeningIP != RelayConfiguration().apiListeningIP {
            notes.append(
                "api-listening-ip is not used: the API shares TURN's port \(config.apiListeningPort) and is served "
                    + "on TURN's listening addresses")
        }
        return notes
    }

    /// A cluster without the shared secret its nodes derive one nonce key from, or a cluster
    /// quota without a cluster (docs/cluster.md).
    private static func clusterWarnings(_ config: RelayConfiguration) -> [String] {
        var notes: [String] = []
        if config.clusterRedis != nil && config.staticAuthSecrets.isEmpty && !config.noAuth {
            notes.append(
                "cluster-redis without static-auth-secret: each node keeps its own nonce key, so a client "
                    + "redirected to another node (300 ALTERNATE-SERVER) must authenticate again there, "
                    + "which Chromium does not do")
        }
        if config.clusterRedis == nil && config.clusterTotalQuota > 0 {
            notes.append("cluster-total-quota is set but cluster-redis is not: it has no effect on a node alone")
        }
        return notes
    }

    /// The relay addresses as `RelayServer` derives them: `relay-ip`, else the non-wildcard
    /// `listening-ip` values, else every interface address; each with its advertised form.
    static func relayAddresses(_ config: RelayConfiguration, interfaceAddresses: [IPAddress]) -> [RelayAddress] {
        RelayAddress.mappings(configuration: config.resolvingAddresses(interfaces: interfaceAddresses))
    }

    /// A relay address that is not one of the host's and that no external-ip maps: binding it
    /// fails, and it is most often the public address written where the private one belongs.
    private static func nonLocalRelay(_ relay: RelayAddress, interfaceAddresses: [IPAddress]) -> String? {
        guard !interfaceAddresses.isEmpty, !interfaceAddresses.contains(relay.bound), relay.bound == relay.advertised
        else { return nil }
        let advice =
            privateKind(relay.bound) == nil
            ? "behind 1:1 NAT set relay-ip to the private address and external-ip=\(relay.bound)/<private>"
            : "use an address of this host's interfaces"
        return "relay address \(relay.bound) is not an address of this host and no external-ip is set for it: "
            + "relay sockets cannot bind it (\(advice))"
    }

    /// Quotas the relay port range cannot serve: each allocation holds one port of one relay address.
    private static func quotaWarnings(_ config: RelayConfiguration, relayCount: Int) -> [String] {
        let range = Int(config.maxPort) - Int(config.minPort) + 1
        guard range > 0 else { return [] }
        let capacity = range * max(1, relayCount)
        let span = relayCount > 1 ? "\(range) ports on each of \(relayCount) relay addresses" : "\(range) ports"
        var notes: [String] = []
        for (key, quota) in [("total-quota", config.totalQuota), ("user-quota", config.userQuota)]
        where quota > capacity {
            notes.append(
                "relay port range \(config.minPort)-\(config.maxPort) (\(span)) is smaller than \(key) "
                    + "\(quota): Allocate fails with 508 (Insufficient Capacity) before the quota is reached")
        }
        return notes
    }

    /// `max-bps` and `bps-capacity` are bytes a second (as in coturn), and the capacity is only
    /// drawn on by allocations that have a `max-bps` to reserve.
    private static func bandwidthWarnings(_ config: RelayConfiguration) -> [String] {
        var notes: [String] = []
        if config.bpsCapacity > 0 && config.maxBPS == 0 {
            notes.append("bps-capacity=\(config.bpsCapacity) has no effect without max-bps: allocations reserve max-bps from it")
        }
        if config.maxBPS > 0 && config.maxBPS < 8_000 {
            notes.append(
                "max-bps=\(config.maxBPS) is bytes a second, not bits: it is below one 64 kbit/s audio stream "
                    + "(8,000 bytes a second), so calls through the relay will lose packets")
        }
        return notes
    }

    /// Whether every listener is explicitly on a private or loopback address: then the server is
    /// an internal one and private relay addresses are what its clients can reach.
    private static func listensOnlyPrivately(_ config: RelayConfiguration) -> Bool {
        !config.listeningIPs.isEmpty
            && config.listeningIPs.allSatisfy { $0.isLoopback || privateKind($0) != nil }
    }

    /// A listener (or "all addresses") that is not loopback, or nil when all are loopback.
    /// The first STUN/TURN listener address beyond loopback (`all addresses` when none is set).
    static func nonLoopbackListener(_ config: RelayConfiguration) -> String? {
        if config.listeningIPs.isEmpty { return "all addresses" }
        let exposed = config.listeningIPs.first { !$0.isLoopback }
        return exposed.map { $0.isWildcard ? "\($0) (all addresses)" : "\($0)" }
    }

    /// TLS listeners that will not start for want of a certificate, or whose files cannot be read.
    private static func tlsWarnings(_ config: RelayConfiguration) -> [String] {
        guard !config.noTLS else { return [] }
        let ports = [config.tlsListeningPort] + (config.altTLSListeningPort.map { [$0] } ?? [])
        let portList = ports.map(String.init).joined(separator: ", ")
        let listener = "TLS listener (port\(ports.count > 1 ? "s" : "") \(portList))"
        guard let cert = config.cert else {
            return ["\(listener) is enabled but no cert is set: it will not start (set cert and pkey, or no-tls)"]
        }
        var notes: [String] = []
        for (key, path) in [("cert", cert), ("pkey", config.pkey)] {
            if let path, !FileManager.default.isReadableFile(atPath: path) {
                notes.append("\(key) '\(path)' is not a readable file: the \(listener) cannot start")
            }
        }
        return notes
    }

    /// The private range `ip` falls in, named; nil for other addresses.
    static func privateKind(_ ip: IPAddress) -> String? {
        privateRanges.first { $0.range.contains(ip) }?.name
    }

}
