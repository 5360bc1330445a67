import Foundation
import Glibc
import RelayCore

/// Main-thread state of coturn's user database (docs/userdb.md).
struct UserDatabaseState {
    let watcher: UserDatabaseWatcher
    /// The last view read; nil until the first read succeeds.
    var view: UserDatabaseView?
    /// The configuration's users and secrets merged with the view's, which every loop's context
    /// carries.
    var credentials: CredentialStore?
    /// The tenants with the view's users and secrets of their realms (docs/tenants.md).
    var tenants: TenantTable?
    /// The running configuration with the view's realm options and peer ranges
    /// (`RelayConfiguration.applying(database:)`), and how many of those did not parse.
    var effective: RelayConfiguration?
    var skipped = 0
    /// Takes the watcher's reports once a second.
    var timer: LoopEvent?
}

// coturn's user database, served from memory (docs/userdb.md): a thread of its own reads it
// when it changes, the main thread swaps the merged credentials into every loop's context. A
// loop never waits for the database, and a database that cannot be read leaves the last good
// view serving.
extension RelayServer {
    /// Seconds the start waits for the first read before it serves without the database.
    static let userDatabaseFirstReadSeconds = 10.0

    /// Starts reading the database, if one is configured, and waits (a little) for the first
    /// view, so users it holds authenticate from the first packet. The heir of a live upgrade
    /// does not wait: the running relayd's loops are paused until it serves, and its users'
    /// allocations carry their keys; a new Allocate of a database user waits for the first read.
    func startUserDatabase() {
        guard let watcher = UserDatabaseWatcher.configured(configuration) else { return }
        let path = watcher.name
        userDatabase = UserDatabaseState(watcher: watcher)
        // hiredis and libpq write to sockets with write(2): a peer that closes must not kill us.
        signal(SIGPIPE, SIG_IGN)
        watcher.start()
        guard inheritance == nil else { return }
        let deadline = Date().addingTimeInterval(Self.userDatabaseFirstReadSeconds)
        while Date() < deadline {
            let reports = watcher.take()
            if !reports.isEmpty {
                take(reports, post: false)
                return
            }
            usleep(20_000)
        }
        logger.error(
            "user database \(path): no answer within \(Int(Self.userDatabaseFirstReadSeconds)) s; serving without it until it answers",
            metadata: ["event": "userdb_slow", "database": "\(path)"])
    }

    /// Takes the watcher's reports once a second on the main loop.
    func watchUserDatabase(base: OpaquePointer) {
        guard userDatabase != nil else { return }
        userDatabase?.timer = LoopEvent(base: base, every: timeval(tv_sec: 1, tv_usec: 0)) { [unowned self] in
            guard let reports = userDatabase?.watcher.take(), !reports.isEmpty else { return }
            take(reports, post: true)
        }
    }

    func stopUserDatabase() {
        userDatabase?.timer?.cancel()
        userDatabase?.watcher.stop()
    }

    /// The running configuration with the database's realm options and peer ranges: what the
    /// loops' contexts and the admission limits are built from.
    var effectiveConfiguration: RelayConfiguration { userDatabase?.effective ?? configuration }

    /// The credentials and the configuration merged from the running configuration and the last
    /// view, made once for every loop (on a new view, or a reload).
    func refreshUserDatabaseCredentials() {
        guard let view = userDatabase?.view else { return }
        userDatabase?.credentials = CredentialStore(configuration: configuration, database: view)
        let (effective, skipped) = configuration.applying(database: view)
        userDatabase?.tenants = TenantTable(configuration: effective, interfaceAddresses: interfaceAddresses, database: view)
        userDatabase?.effective = effective
        userDatabase?.skipped = skipped
    }

    private func take(_ reports: [UserDatabaseWatcher.Report], post: Bool) {
        guard let path = userDatabase?.watcher.name else { return }
        var changed = false
        for report in reports {
            switch report {
            case .view(let view):
                userDatabase?.view = view
                changed = true
                let realm = view.realms[configuration.realm]
                logger.notice(
                    "user database \(path) read: \(realm?.userCount ?? 0) users and \(realm?.secrets.count ?? 0) secrets for realm \(configuration.realm)",
                    metadata: [
                        "event": "userdb_loaded", "database": "\(path)", "users": "\(realm?.userCount ?? 0)",
                        "secrets": "\(realm?.secrets.count ?? 0)", "realms": "\(view.realms.count)",
                        "refused_rows": "\(view.refusedRows)",
                    ])
            case .failed(let reason):
                logger.error(
                    "user database \(path) cannot be read (\(reason)); serving from the last good view",
                    metadata: ["event": "userdb_failed", "database": "\(path)", "reason": "\(reason)"])
            }
        }
        guard changed else { return }
        refreshUserDatabaseCredentials()
        let skipped = userDatabase?.skipped ?? 0
        if skipped > 0 {
            logger.warning(
                "user database \(path): \(skipped) realm options or peer ranges of realm \(configuration.realm) do not parse; skipped",
                metadata: ["event": "userdb_values_skipped", "database": "\(path)", "skipped": "\(skipped)"])
        }
        admission.update(limits: .init(configuration: effectiveConfiguration))
        if post { postContexts() }
    }
}
