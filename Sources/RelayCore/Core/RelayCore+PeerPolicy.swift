import StunCodec

extension RelayCore {
    /// Whether the peer policy allows `peer` (RFC 8656 §21.3), with relayd's own relayed addresses
    /// resolved: one is reachable only while a live allocation of this relay holds its port, of
    /// the same transport (a UDP allocation for datagrams, a TCP allocation for RFC 6062
    /// connections). Any other socket on the relay's address, an SFU or a game server whose port
    /// falls in the relay port range, stays out of reach (docs/peer-policy.md). The policy is
    /// that of the allocation's tenant, and another tenant's relayed address is reachable only
    /// when both tenants allow it (docs/tenants.md).
    func peerAllowed(_ peer: TransportAddress, tcp: Bool = false, tenant: Int) -> Bool {
        switch peerVerdict(peer, tenant: tenant) {
        case .allowed: return true
        case .relayedAddress: return holdsRelayedAddress(peer, tcp: tcp) && tenantMayReach(peer, from: tenant, tcp: tcp)
        default: return false
        }
    }

    /// Whether a live allocation of this node holds `peer`, in its bound or advertised
    /// (`external-ip`) form, embedded IPv4 forms reduced.
    func holdsRelayedAddress(_ peer: TransportAddress, tcp: Bool) -> Bool {
        let ip = peer.ip.reducedToIPv4
        let holder: RelayPortPool.Holder = tcp ? .tcpAllocation : .udpAllocation
        for relay in context.relayAddresses where relay.bound == ip || relay.advertised == ip {
            if tables.ports.isHeld(peer.port, on: relay.bound, by: holder) { return true }
        }
        return false
    }
}
