extension ConfigAdvisor {
    /// What is wrong with `userdb` for the user that runs the check (docs/userdb.md): a file
    /// that cannot be read as coturn's database. relayd then serves without its users until it
    /// can be read.
    static func userDatabaseWarning(_ config: RelayConfiguration) -> String? {
        guard let path = config.userDatabase else { return nil }
        do {
            let view = try SQLiteUserDatabase(path: path).read()
            let realm = view.realms[config.realm]
            guard let realm, realm.userCount + realm.secrets.count > 0 else {
                return "userdb \(path) holds no user and no secret for realm \(config.realm) "
                    + "(its realms: \(view.realms.keys.sorted().joined(separator: ", ")))"
            }
            return nil
        } catch {
            return "userdb \(path) cannot be read: \(error.description); relayd serves without its users until it can"
        }
    }
}
