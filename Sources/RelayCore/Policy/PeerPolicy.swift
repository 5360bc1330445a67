import StunCodec

/// Decides which peer transport addresses an allocation may reach (RFC 8656 §21.3: the server
/// must not become a proxy into networks its operator did not intend). Deny first, open by config.
///
/// Order: the server's own service ports on its own addresses are always denied; then
/// `denied-peer-ip`, then `allowed-peer-ip`; relayd's own relayed addresses in the relay port
/// range are allowed (two clients of one relay talking to each other); `allow-loopback-peers`
/// opens loopback; the special-purpose ranges are denied; everything else is allowed.
/// Embedded IPv4 forms are reduced first, so `::ffff:127.0.0.1` is judged as `127.0.0.1`.
public struct PeerPolicy: Sendable, Equatable {
    let denied: [IPRange]
    let allowed: [IPRange]
    let allowLoopback: Bool
    /// Addresses that are the server's own: listeners, relays, external (public) forms, interfaces.
    let ownAddresses: Set<IPAddress>
    /// Ports the server listens on for clients, API and metrics.
    let servicePorts: Set<UInt16>
    /// Relay addresses (bound and advertised forms) whose relay ports stay reachable.
    let relayAddresses: Set<IPAddress>
    let relayPorts: ClosedRange<UInt16>

    public init(
        denied: [IPRange], allowed: [IPRange], allowLoopback: Bool, ownAddresses: Set<IPAddress>,
        servicePorts: Set<UInt16>, relayAddresses: Set<IPAddress>, relayPorts: ClosedRange<UInt16>
    ) {
        self.denied = denied
        self.allowed = allowed
        self.allowLoopback = allowLoopback
        self.ownAddresses = Set(ownAddresses.map(\.reducedToIPv4))
        self.servicePorts = servicePorts
        self.relayAddresses = Set(relayAddresses.map(\.reducedToIPv4))
        self.relayPorts = relayPorts
    }

    /// Why a peer was refused, for the drop and error counters.
    public enum Verdict: Sendable, Hashable {
        case allowed
        case deniedServicePort
        case deniedByConfiguration
        case deniedSpecialPurpose
    }

    public func verdict(for peer: TransportAddress) -> Verdict {
        let ip = peer.ip.reducedToIPv4
        if servicePorts.contains(peer.port) && isOwn(ip) { return .deniedServicePort }
        for range in denied where range.contains(ip) || range.contains(peer.ip) { return .deniedByConfiguration }
        for range in allowed where range.contains(ip) || range.contains(peer.ip) { return .allowed }
        if relayPorts.contains(peer.port) && relayAddresses.contains(ip) { return .allowed }
        if allowLoopback && ip.isLoopback { return .allowed }
        if SpecialPurposeRanges.contains(ip) || SpecialPurposeRanges.contains(peer.ip) { return .deniedSpecialPurpose }
        return .allowed
    }

    @inlinable
    public func isAllowed(_ peer: TransportAddress) -> Bool { verdict(for: peer) == .allowed }

    func isOwn(_ ip: IPAddress) -> Bool {
        ownAddresses.contains(ip) || ip.isLoopback || ip.isWildcard || ip.ipv4Value.map { $0 >> 24 == 0 } == true
    }
}
