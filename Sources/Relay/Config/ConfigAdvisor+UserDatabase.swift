extension ConfigAdvisor {
    /// What is wrong with `userdb` for the user that runs the check (docs/userdb.md): a file
    /// that cannot be read as coturn's database. relayd then serves without its users until it
    /// can be read.
    public static func userDatabaseWarning(_ config: RelayConfiguration) -> String? {
        let source: any UserDatabaseSource
        let path: String
        if let file = config.userDatabase {
            (source, path) = (SQLiteUserDatabase(path: file), "userdb \(file)")
        } else if let conninfo = config.postgresUserDatabase {
            (source, path) = (PostgresUserDatabase(conninfo: conninfo), "psql-userdb (\(PostgresUserDatabase.redacted(conninfo)))")
        } else if let endpoint = config.redisUserDatabase {
            (source, path) = (RedisUserDatabase(endpoint: endpoint), "redis-userdb (\(endpoint))")
        } else {
            return nil
        }
        do {
            let view = try source.read()
            let realm = view.realms[config.realm]
            guard let realm, realm.userCount + realm.secrets.count > 0 else {
                return "\(path) holds no user and no secret for realm \(config.realm) "
                    + "(its realms: \(view.realms.keys.sorted().joined(separator: ", ")))"
            }
            return nil
        } catch {
            return "\(path) cannot be read: \(error.description); relayd serves without its users until it can"
        }
    }
}
