import RelayCore

extension RelayConfiguration {
    /// This configuration with what coturn's user database holds for its realm
    /// (docs/userdb.md): `turn_realm_option`'s `max-bps`, `total-quota` and `user-quota` replace
    /// the configured values, as they do in coturn, and the realm's `allowed_peer_ip` and
    /// `denied_peer_ip` ranges join the configured ones; each tenant gets its own realm's
    /// (docs/tenants.md). A value that does not parse as the
    /// key's would in the configuration is skipped, and counted in `skipped`.
    func applying(database view: UserDatabaseView?) -> (configuration: RelayConfiguration, skipped: Int) {
        guard let view else { return (self, 0) }
        var c = self
        var skipped = 0
        var mainKeys = Set<String>()
        if let realm = view.realms[realm] { skipped += Self.apply(realm, to: &c, keys: &mainKeys) }
        // Each tenant's realm options and peer ranges, as options of its own file (docs/tenants.md).
        for i in c.tenants.indices {
            var tenant = c.tenants[i]
            guard let realm = view.realms[tenant.realm] else { continue }
            skipped += Self.apply(realm, to: &tenant.configuration, keys: &tenant.keys)
            c.tenants[i] = tenant
        }
        return (c, skipped)
    }

    /// Applies one realm's options and peer ranges to `c`, adding the options it sets to `keys`;
    /// returns how many did not parse.
    private static func apply(_ realm: UserDatabaseView.Realm, to c: inout RelayConfiguration, keys: inout Set<String>)
        -> Int
    {
        var skipped = 0
        let options: [(String, WritableKeyPath<RelayConfiguration, Int>, ClosedRange<Int>)] = [
            ("max-bps", \.maxBPS, 0...Int(UInt32.max)),
            ("total-quota", \.totalQuota, 0...Int(Int32.max)),
            ("user-quota", \.userQuota, 0...Int(Int32.max)),
        ]
        for (name, field, range) in options {
            guard let text = realm.options[name] else { continue }
            guard let value = try? ConfigValueParser.integer(text, in: range) else {
                skipped += 1
                continue
            }
            c[keyPath: field] = value
            keys.insert(name)
        }
        for text in realm.allowedPeers {
            guard let range = try? ConfigValueParser.ipRange(text) else {
                skipped += 1
                continue
            }
            c.allowedPeerIPs.append(range)
        }
        for text in realm.deniedPeers {
            guard let range = try? ConfigValueParser.ipRange(text) else {
                skipped += 1
                continue
            }
            c.deniedPeerIPs.append(range)
        }
        return skipped
    }
}
