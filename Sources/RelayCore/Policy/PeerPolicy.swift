import StunCodec

/// Decides which peer transport addresses an allocation may reach (RFC 8656 §21.3: the server
/// must not become a proxy into networks its operator did not intend). Deny first, open by config.
///
/// Order: the server's own service ports on its own addresses are always denied; then
/// `denied-peer-ip`; then relayd's own relay addresses at a port of the relay port range are
/// `.relayedAddress`: reachable only while a live allocation of this relay holds that port (two
/// clients of one relay talking to each other), which the core checks, never any other socket
/// bound there; then `allowed-peer-ip`; `allow-loopback-peers` opens loopback; the
/// special-purpose ranges are denied; everything else is allowed (docs/peer-policy.md).
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
        /// One of relayd's own relay addresses (bound or advertised form) at a port of the relay
        /// port range: allowed only if a live allocation holds the port (`RelayCore.peerAllowed`).
        case relayedAddress
        case deniedServicePort
        case deniedByConfiguration
        case deniedSpecialPurpose
    }

    public func verdict(for peer: TransportAddress) -> Verdict {
        let ip = peer.ip.reducedToIPv4
        if servicePorts.contains(peer.port) && isOwn(ip) { return .deniedServicePort }
        for range in denied where range.contains(ip) || range.contains(peer.ip) { return .deniedByConfiguration }
        if relayPorts.contains(peer.port) && relayAddresses.contains(ip) { return .relayedAddress }
        for range in allowed where range.contains(ip) || range.contains(peer.ip) { return .allowed }
        if allowLoopback && ip.isLoopback { return .allowed }
        if SpecialPurposeRanges.contains(ip) || SpecialPurposeRanges.contains(peer.ip) { return .deniedSpecialPurpose }
        return .allowed
    }

    /// Allowed outright, or one of relayd's own relayed addresses: for a caller that knows a live
    /// allocation holds it (the sender of a relay-to-relay packet), or that checks that itself.
    @inlinable
    public func allowsLiveRelayed(_ peer: TransportAddress) -> Bool {
        let verdict = verdict(for: peer)
        return verdict == .allowed || verdict == .relayedAddress
    }

    func isOwn(_ ip: IPAddress) -> Bool {
        ownAddresses.contains(ip) || ip.isLoopback || ip.isWildcard || ip.ipv4Value.map { $0 >> 24 == 0 } == true
    }
}
