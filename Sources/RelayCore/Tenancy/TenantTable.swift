import StunCodec

/// The node's tenants and how a client reaches each (docs/tenants.md): by the local address it
/// sent to, by the TLS server name it asked for (the I/O layer resolves that one, `tenant(serverName:)`),
/// by ORIGIN (coturn's `turn_origin_to_realm`), or, on an address tenants share, by which
/// tenant's secret verifies its REST credential. Index 0 is the default tenant, whose
/// credentials, policy and `max-bps` the core takes from `CoreContext` itself.
///
/// A tenant keeps its index for the life of the process: allocations, TLS connections and the
/// relay port pool hold indexes, and a reload that adds, reorders or removes tenants must not
/// make them name another tenant. So the table is sparse: a removed tenant leaves an empty
/// slot, whose allocations relay nothing more and whose credentials verify nothing.
public struct TenantTable: Sendable {
    /// `slots[i - 1]` is tenant `i`; nil for a tenant a reload removed.
    public private(set) var slots: [Tenant?]
    /// Each slot's peer policy, apart, so the data path reads it in place.
    private var policies: [PeerPolicy?]
    /// Local (listener) addresses that belong to one tenant.
    public private(set) var byListener: [IPAddress: Int]
    /// ORIGIN values (`WebOrigin.normalized`) that name a tenant.
    public private(set) var byOrigin: [String: Int]
    /// TLS server names (lower case) that name a tenant.
    public private(set) var byServerName: [String: Int]
    /// Whether the default tenant may relay to tenants that allow it too.
    public var defaultCrossTenantRelay: Bool
    /// The configured tenants' indexes, in the configuration's order (the order REST secrets
    /// are tried on a shared address).
    public private(set) var order: [Int]
    /// Whether any tenant besides the default one is configured.
    public let isMultiTenant: Bool

    /// Only the default tenant: a configuration without tenants.
    public static let single = TenantTable(
        slots: [], order: [], byListener: [:], byOrigin: [:], byServerName: [:], defaultCrossTenantRelay: false)

    /// `slots[i - 1]` is tenant `i`; `order` lists the configured ones' indexes as the
    /// configuration orders them.
    public init(
        slots: [Tenant?], order: [Int], byListener: [IPAddress: Int], byOrigin: [String: Int],
        byServerName: [String: Int], defaultCrossTenantRelay: Bool
    ) {
        self.slots = slots
        policies = slots.map { $0?.policy }
        self.order = order.filter { $0 >= 1 && $0 <= slots.count && slots[$0 - 1] != nil }
        self.byListener = byListener
        self.byOrigin = Dictionary(byOrigin.map { (WebOrigin.normalized($0.key), $0.value) }) { first, _ in first }
        self.byServerName = byServerName
        self.defaultCrossTenantRelay = defaultCrossTenantRelay
        isMultiTenant = !self.order.isEmpty
    }

    /// The configured tenant at `index` (1...); nil for 0, an empty slot and anything out of range.
    @inline(__always)
    public func configured(_ index: Int) -> Tenant? {
        index >= 1 && index <= slots.count ? slots[index - 1] : nil
    }

    /// Tenant `index`'s policy allows `peer` outright or as a live relayed address; false for
    /// an empty slot (`PeerPolicy.allowsLiveRelayed`, read in place).
    @inline(__always)
    func allowsLiveRelayed(_ peer: TransportAddress, tenant index: Int) -> Bool {
        guard index >= 1 && index <= policies.count else { return false }
        return policies[index - 1]?.allowsLiveRelayed(peer) ?? false
    }

    /// Tenant `index`'s verdict on `peer`; denied for an empty slot.
    @inline(__always)
    func verdict(for peer: TransportAddress, tenant index: Int) -> PeerPolicy.Verdict {
        guard index >= 1 && index <= policies.count else { return .deniedByConfiguration }
        return policies[index - 1]?.verdict(for: peer) ?? .deniedByConfiguration
    }

    /// The name of tenant `index`: empty for the default tenant (and an empty slot).
    public func name(of index: Int) -> String { configured(index)?.name ?? "" }

    /// The index of the tenant named `name`; 0 for an empty or unknown name.
    public func index(named name: String) -> Int {
        guard !name.isEmpty, let i = slots.firstIndex(where: { $0?.name == name }) else { return 0 }
        return i + 1
    }

    /// The tenant a quota user (`<tenant>/<user>`, `Tenant.quotaUser`) belongs to: how an
    /// allocation adopted from a journal or another process finds its tenant again.
    public func index(ofQuotaUser user: String) -> Int {
        guard isMultiTenant, let slash = user.utf8.firstIndex(of: 0x2F) else { return 0 }
        return index(named: String(user[..<slash]))
    }

    /// The tenant a TLS server name (SNI, RFC 6066 §3) names; nil when none does.
    public func tenant(serverName: String) -> Int? { byServerName[serverName.lowercased()] }

    /// Whether allocations of tenants `a` and `b` may relay to each other: the same tenant, or
    /// both allow `cross-tenant-relay`.
    @inline(__always)
    public func mayRelay(between a: Int, and b: Int) -> Bool {
        a == b || (allowsCrossRelay(a) && allowsCrossRelay(b))
    }

    private func allowsCrossRelay(_ index: Int) -> Bool {
        index == 0 ? defaultCrossTenantRelay : configured(index)?.crossTenantRelay ?? false
    }
}
