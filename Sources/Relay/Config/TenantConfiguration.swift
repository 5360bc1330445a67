import RelayCore
import StunCodec

extension RelayConfiguration {
    /// The main file's API keys and every tenant's, each tenant's marked with its name.
    public var allAPIKeys: [APIKey] { apiKeys + tenants.flatMap(\.configuration.apiKeys) }

    /// The credential service of each tenant that has a REST secret, by tenant name: its
    /// secret, with the main file's separator, lifetimes and URIs (docs/tenants.md).
    public func tenantCredentialServices(interfaceAddresses: [IPAddress]) -> [String: CredentialService] {
        var services: [String: CredentialService] = [:]
        for tenant in tenants where !tenant.restSecrets.isEmpty {
            var c = self
            c.useAuthSecret = true
            c.staticAuthSecrets = tenant.restSecrets
            services[tenant.name] = CredentialService(configuration: c, interfaceAddresses: interfaceAddresses)
        }
        return services
    }
}

/// One tenant as its file defines it (docs/tenants.md): a configuration of the tenant keys
/// only, and which of them the file set, so the ones it leaves out fall back to the main file's.
public struct TenantConfiguration: Sendable, Equatable {
    /// The file's base name without `.conf`: the tenant's label and quota prefix.
    public var name: String
    /// The file it was read from.
    public var file: String
    /// The tenant's keys, applied over a default configuration.
    public var configuration: RelayConfiguration
    /// The keys the file set.
    public var keys: Set<String>
    /// Where each key was set, for errors that name the file and line.
    public var sources: [String: [ConfigSource]] = [:]

    /// The keys a tenant file may hold; any other is an error naming its file and line.
    public static let allowedKeys: Set<String> = [
        "realm", "use-auth-secret", "static-auth-secret", "user", "user-quota", "total-quota", "max-bps",
        "bps-capacity", "allowed-peer-ip", "denied-peer-ip", "listening-ip", "cert", "pkey", "pkey-pwd",
        "api-key", "tls-server-name", "origin", "reserve-allocations", "reserve-bps", "cross-tenant-relay",
    ]

    /// The keys only a tenant file may hold.
    public static let tenantOnlyKeys: [String] = ["tls-server-name", "origin", "reserve-allocations", "reserve-bps"]

    /// The tenant's realm: its own `realm`, else its name.
    public var realm: String { keys.contains("realm") ? configuration.realm : name }

    /// Its REST secrets: `static-auth-secret` lines turn REST credentials on by themselves.
    public var restSecrets: [String] { configuration.staticAuthSecrets }

    /// `user-quota` and `max-bps` fall back to the main file's; `total-quota` and `bps-capacity`
    /// are the tenant's own caps (0: none beyond the node's).
    public var userQuota: Int? {
        keys.contains("user-quota") ? configuration.userQuota : nil
    }

    public func maxBPS(main: RelayConfiguration) -> Int { keys.contains("max-bps") ? configuration.maxBPS : main.maxBPS }

    /// Whether `name` can name a tenant: 1 to 32 of a-z, 0-9, `-` and `_`, starting with a
    /// letter or digit (it becomes a metrics label value and a quota key prefix); `default` is
    /// the default tenant's label.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...32).contains(bytes.count), name != "default" else { return false }
        func allowed(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) }
        return allowed(bytes[0]) && bytes.allSatisfy { allowed($0) || $0 == 0x2D || $0 == 0x5F }
    }
}
