import StunCodec

/// The node's tenants and how a client reaches each (docs/tenants.md): by the local address it
/// sent to, by the TLS server name it asked for (the I/O layer resolves that one, `tenant(serverName:)`),
/// by ORIGIN (coturn's `turn_origin_to_realm`), or, on an address tenants share, by which
/// tenant's secret verifies its REST credential. Index 0 is the default tenant, whose
/// credentials, policy and `max-bps` the core takes from `CoreContext` itself.
public struct TenantTable: Sendable {
    public private(set) var tenants: [Tenant]
    /// Local (listener) addresses that belong to one tenant.
    public private(set) var byListener: [IPAddress: Int]
    /// ORIGIN values (RFC 6454 serializations, compared as given) that name a tenant.
    public private(set) var byOrigin: [String: Int]
    /// TLS server names (lower case) that name a tenant.
    public private(set) var byServerName: [String: Int]
    /// Whether the default tenant may relay to tenants that allow it too.
    public var defaultCrossTenantRelay: Bool

    /// Only the default tenant: a configuration without tenants.
    public static let single = TenantTable(
        tenants: [], byListener: [:], byOrigin: [:], byServerName: [:], defaultCrossTenantRelay: false)

    /// `tenants` are the configured ones, in order; they get indexes 1, 2, … (0 is the
    /// default tenant, which is not in the list).
    public init(
        tenants: [Tenant], byListener: [IPAddress: Int], byOrigin: [String: Int], byServerName: [String: Int],
        defaultCrossTenantRelay: Bool
    ) {
        self.tenants = tenants
        self.byListener = byListener
        self.byOrigin = byOrigin
        self.byServerName = byServerName
        self.defaultCrossTenantRelay = defaultCrossTenantRelay
    }

    /// Whether any tenant besides the default one is configured.
    @inline(__always)
    public var isMultiTenant: Bool { !tenants.isEmpty }

    /// Tenants, default one included.
    public var count: Int { tenants.count + 1 }

    /// The configured tenant at `index` (1...); nil for 0 and anything out of range.
    @inline(__always)
    public func configured(_ index: Int) -> Tenant? {
        index >= 1 && index <= tenants.count ? tenants[index - 1] : nil
    }

    /// The name of tenant `index`: empty for the default tenant.
    public func name(of index: Int) -> String { configured(index)?.name ?? "" }

    /// The index of the tenant named `name`; 0 for an empty or unknown name.
    public func index(named name: String) -> Int {
        guard !name.isEmpty, let i = tenants.firstIndex(where: { $0.name == name }) else { return 0 }
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
