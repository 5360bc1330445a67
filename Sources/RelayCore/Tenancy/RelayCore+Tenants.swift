import StunCodec

/// What a core asks of its tenants (docs/tenants.md). Tenant 0's credentials, policy and
/// `max-bps` are the context's own, so a configuration without tenants reads exactly what it
/// read before tenants existed.
extension RelayCore {
    /// Tenant `index`'s long-term credentials under its own realm.
    @inline(__always)
    func credentials(ofTenant index: Int) -> CredentialStore {
        context.tenants.configured(index)?.credentials ?? context.credentials
    }

    /// `PeerPolicy.allowsLiveRelayed` under tenant `index`'s policy, read in place: the data
    /// path calls it per packet, and the default tenant's is the context's own.
    @inline(__always)
    func allowsLiveRelayed(_ peer: TransportAddress, tenant index: Int) -> Bool {
        if index == 0 { return context.policy.allowsLiveRelayed(peer) }
        return context.tenants.allowsLiveRelayed(peer, tenant: index)
    }

    /// `PeerPolicy.verdict` under tenant `index`'s policy, read in place.
    @inline(__always)
    func peerVerdict(_ peer: TransportAddress, tenant index: Int) -> PeerPolicy.Verdict {
        if index == 0 { return context.policy.verdict(for: peer) }
        return context.tenants.verdict(for: peer, tenant: index)
    }

    /// Tenant `index`'s `max-bps` per allocation.
    func maxBPS(ofTenant index: Int) -> Int {
        context.tenants.configured(index)?.maxBPS ?? settings.maxBPS
    }

    /// The user id quotas and blocks count for `username` of tenant `index` (`Tenant.quotaUser`).
    func quotaUser(of username: String, tenant index: Int) -> String {
        context.tenants.configured(index)?.quotaUser(of: username) ?? String(context.credentials.userID(of: username))
    }

    /// The tenant a request reached before any credential is read (docs/tenants.md, "How a
    /// client reaches its tenant"): the local address it was sent to, then the TLS server name
    /// of its connection, then its ORIGIN. Nil on an address tenants share: the credential then
    /// decides.
    func tenantHint(for message: StunMessage, origin: ClientOrigin) -> Int? {
        let tenants = context.tenants
        guard tenants.isMultiTenant else { return nil }
        if let index = tenants.byListener[origin.fiveTuple.server.ip.reducedToIPv4] { return index }
        if origin.serverNameTenant != 0 { return Int(origin.serverNameTenant) }
        if !tenants.byOrigin.isEmpty, let attribute = message.attribute(.origin),
            let text = String(validating: attribute.value, as: UTF8.self),
            let index = tenants.byOrigin[WebOrigin.normalized(text)]
        {
            return index
        }
        return nil
    }

    /// Whether an allocation of tenant `tenant` may exchange packets with `peer`, one of
    /// relayd's own relayed addresses held by a live allocation: only when both tenants allow it
    /// (`TenantTable.mayRelay`). Always true without tenants.
    @inline(__always)
    func tenantMayReach(_ peer: TransportAddress, from tenant: Int, tcp: Bool) -> Bool {
        guard context.tenants.isMultiTenant else { return true }
        let ip = peer.ip.reducedToIPv4
        let holder: RelayPortPool.Holder = tcp ? .tcpAllocation : .udpAllocation
        for relay in context.relayAddresses where relay.bound == ip || relay.advertised == ip {
            guard let other = tables.ports.tenant(holding: peer.port, on: relay.bound, by: holder) else { continue }
            // A port the other side of a live upgrade holds: its tenant is not known here.
            if other == RelayPortPool.unknownTenant { return true }
            return context.tenants.mayRelay(between: tenant, and: Int(other))
        }
        return true
    }

    /// Records `allocation`'s tenant on the ports of its relayed addresses, for
    /// `tenantMayReach` on every loop.
    func noteTenant(of allocation: Allocation) {
        guard context.tenants.isMultiTenant else { return }
        for relay in [allocation.main] + (allocation.additional.map { [$0] } ?? []) {
            tables.ports.setTenant(allocation.tenant, of: relay.relayedAddress.port, on: relay.relayedAddress.ip)
        }
    }

    /// Who may bind an allocation's peer connections (RFC 6062 §5.4: the ConnectionBind's
    /// USERNAME), with its tenant: a REST username is unique within a tenant only.
    func bindIdentity(username: String, tenant: Int) -> String {
        tenant == 0 ? username : context.tenants.name(of: tenant) + "\u{0}" + username
    }

    func bindIdentity(of allocation: Allocation) -> String {
        bindIdentity(username: allocation.username, tenant: allocation.tenant)
    }
}
