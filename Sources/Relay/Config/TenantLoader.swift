import Foundation
import RelayCore
import StunCodec

/// Reads the tenant files `tenant=` names (docs/tenants.md) and checks that the tenants can be
/// told apart: distinct names, realms, REST secrets, listener addresses, server names and
/// ORIGINs. Every error names the file, the line and the key.
enum TenantLoader {
    static func load(_ main: inout RelayConfiguration, mainFile: String?, sources: [String: [ConfigSource]])
        throws(ConfigError)
    {
        var tenants: [TenantConfiguration] = []
        for (index, path) in main.tenantFiles.enumerated() {
            let source = sources["tenant"]?[safe: index]
            let resolved = resolve(path, relativeTo: mainFile)
            var name = (resolved as NSString).lastPathComponent
            if name.hasSuffix(".conf") { name.removeLast(5) }
            guard TenantConfiguration.isValidName(name) else {
                throw .conflict(
                    "tenant file '\(resolved)' must be named NAME.conf, NAME 1-32 of a-z, 0-9, '-', '_'", key: "tenant",
                    at: source)
            }
            if tenants.contains(where: { $0.name == name }) {
                throw .conflict("tenant '\(name)' is defined twice", key: "tenant", at: source)
            }
            tenants.append(try read(resolved, name: name))
        }
        for key in TenantConfiguration.tenantOnlyKeys {
            if let where_ = sources[key]?.first {
                throw .conflict("only a tenant file may set it (docs/tenants.md)", key: key, at: where_)
            }
        }
        try checkDistinct(tenants, main: main)
        // A tenant's certificate is served by the TLS listeners, which need the node's own.
        if main.cert == nil, let tenant = tenants.first(where: { $0.configuration.cert != nil }) {
            throw .conflict(
                "a tenant's certificate needs the main file's cert and pkey (the TLS listeners serve with them)",
                key: "cert", at: tenant.sources["cert"]?.first)
        }
        var names = Set(main.apiKeys.map(\.name))
        for tenant in tenants {
            for key in tenant.configuration.apiKeys where !names.insert(key.name).inserted {
                throw .conflict(
                    "API key name '\(key.name)' is defined twice", key: "api-key", at: tenant.sources["api-key"]?.first)
            }
        }
        main.tenants = tenants
    }

    private static func resolve(_ path: String, relativeTo mainFile: String?) -> String {
        guard !path.hasPrefix("/"), let mainFile else { return path }
        return ((mainFile as NSString).deletingLastPathComponent as NSString).appendingPathComponent(path)
    }

    private static func read(_ path: String, name: String) throws(ConfigError) -> TenantConfiguration {
        let text = try RelayConfiguration.readFile(path)
        let entries = try ConfigFileParser.parse(text, fileName: path)
        for entry in entries where !TenantConfiguration.allowedKeys.contains(entry.key) {
            throw .conflict("not a tenant key (docs/tenants.md lists them)", key: entry.key, at: entry.source)
        }
        let output = try ConfigAssembler.assemble(file: entries, commandLine: [])
        let tenant = TenantConfiguration(
            name: name, file: path, configuration: output.configuration, keys: Set(output.sources.keys),
            sources: output.sources)
        if (tenant.configuration.cert == nil) != (tenant.configuration.pkey == nil) {
            let key = tenant.configuration.cert == nil ? "pkey" : "cert"
            throw .conflict("a tenant's certificate needs both cert and pkey", key: key, at: output.sources[key]?.first)
        }
        if tenant.configuration.cert != nil && tenant.configuration.serverNames.isEmpty {
            throw .conflict(
                "a tenant's certificate is chosen by its tls-server-name; none is set", key: "cert",
                at: output.sources["cert"]?.first)
        }
        var owned = tenant
        for i in owned.configuration.apiKeys.indices { owned.configuration.apiKeys[i].tenant = name }
        return owned
    }

    /// Two tenants sharing a realm, secret, address, server name or ORIGIN could not be told
    /// apart, and a credential of one could verify in the other.
    private static func checkDistinct(_ tenants: [TenantConfiguration], main: RelayConfiguration) throws(ConfigError) {
        var realms: [String: String] = [main.realm: "the main file"]
        var secrets: [String: String] = [:]
        for secret in main.staticAuthSecrets { secrets[secret] = "the main file" }
        var listeners: [IPAddress: String] = [:]
        var serverNames: [String: String] = [:]
        var origins: [String: String] = [:]
        func claim<Key: Hashable>(
            _ table: inout [Key: String], _ key: Key, _ tenant: TenantConfiguration, what: String, configKey: String
        ) throws(ConfigError) {
            let owner = "tenant '\(tenant.name)'"
            if let other = table[key], other != owner {
                // Named at the tenant file's line for the key (the realm: the file itself).
                let at = tenant.sources[configKey]?.first ?? .file(path: tenant.file, line: 1)
                throw .conflict("\(owner) shares \(what) with \(other)", key: configKey, at: at)
            }
            table[key] = owner
        }
        for tenant in tenants {
            try claim(&realms, tenant.realm, tenant, what: "its realm", configKey: "realm")
            for secret in tenant.restSecrets {
                try claim(&secrets, secret, tenant, what: "a static-auth-secret", configKey: "static-auth-secret")
            }
            for ip in tenant.configuration.listeningIPs {
                try claim(&listeners, ip.reducedToIPv4, tenant, what: "listening-ip \(ip)", configKey: "listening-ip")
                if !main.listeningIPs.isEmpty && !main.listeningIPs.contains(ip) {
                    throw .conflict(
                        "tenant '\(tenant.name)': listening-ip \(ip) is not one the main file listens on", key: "listening-ip",
                        at: tenant.sources["listening-ip"]?.first)
                }
            }
            for name in tenant.configuration.serverNames {
                try claim(&serverNames, name, tenant, what: "tls-server-name \(name)", configKey: "tls-server-name")
            }
            for origin in tenant.configuration.origins {
                try claim(&origins, origin, tenant, what: "origin \(origin)", configKey: "origin")
            }
        }
    }
}

extension Array {
    fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
