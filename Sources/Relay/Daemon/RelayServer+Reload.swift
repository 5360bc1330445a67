import CLibevent
import Glibc
import Logging
import RelayCore

extension RelayServer {
    /// SIGHUP: re-reads the configuration (`reloadArguments`: `-c FILE` plus the command line)
    /// and applies it without touching live allocations: secrets and users (existing
    /// allocations keep the key they were made with; new Allocates use the new set), peer policy,
    /// quotas and limits, TLS certificate and key, log level, API keys. Restart-only settings
    /// (listeners, threads, relay addresses and ports) keep their running values and are logged
    /// as "restart needed". A file that does not load is rejected with its error and the running
    /// configuration stays. Also reopens the log file (`onReload`), for logrotate.
    /// Whether the configuration loaded and applied (a rejected file keeps the running one).
    @discardableResult
    func reload() -> Bool {
        notifier.notifyReloading(status: "reloading configuration")
        defer { notifier.notifyReady(status: readyStatus) }
        onReload?()
        guard let arguments = reloadArguments else {
            streams.reloadTLS(using: configuration)
            return true
        }
        let loaded: ConfigLoadResult
        do {
            loaded = try RelayConfiguration.load(arguments: arguments)
        } catch {
            logger.error(
                "configuration reload rejected, keeping the running configuration: \(error.description)",
                metadata: ["event": "reload_failed"])
            return false
        }
        for warning in loaded.warnings {
            logger.warning("\(warning)", metadata: ["event": "config_warning"])
        }
        let candidate = loaded.configuration.resolvingAddresses(interfaces: interfaceAddresses)
        let (next, restartNeeded) = RestartOnlySetting.merge(running: configuration, candidate: candidate)
        for key in restartNeeded {
            logger.warning(
                "\(key) changed in the file: restart needed, running value kept",
                metadata: ["event": "reload_restart_needed", "key": "\(key)"])
        }
        apply(next)
        logger.notice(
            "configuration reloaded",
            metadata: [
                "event": "reloaded", "file": "\(loaded.configFile ?? "-")",
                "restart_needed": "\(restartNeeded.joined(separator: ","))",
            ])
        return true
    }

    /// The files a running server watches (`cert-check-interval`): certificates and keys, and
    /// the secret files that reload.
    static func watchedFiles(_ c: RelayConfiguration) -> [String] {
        [c.cert, c.pkey, c.apiCert, c.apiPkey, c.staticAuthSecretFile, c.apiKeyFile, c.pkeyPasswordFile].compactMap { $0 }
    }

    /// Makes `next` the running configuration: shared trackers first, then one new context per loop.
    func apply(_ next: RelayConfiguration) {
        let previous = configuration
        configuration = next
        refreshUserDatabaseCredentials()
        logger.logLevel = next.logLevel
        admission.update(limits: .init(configuration: effectiveConfiguration))
        clusterLedger?.update(clusterTotalQuota: next.clusterTotalQuota)
        sourceLimits = sourceLimits.updated(from: previous, to: next)
        streams.limiter.update(ConnectionLimiter.Limits(configuration: next))
        streams.reloadTLS(using: next)
        if let problem = http?.update(configuration: next) {
            logger.error("\(problem)", metadata: ["event": "reload_api_tls_failed"])
        } else {
            // A renewed API certificate, now served: the fleet's CLI pins it from the next heartbeat.
            clusterAgent?.apiSHA256 =
                NodeAPIEndpoint.certificatePath(configuration: next).flatMap(NodeAPIEndpoint.fingerprint) ?? ""
        }
        ports.reconfigure(range: next.minPort...next.maxPort, addresses: RelayAddress.mappings(configuration: next).map(\.bound))
        // New mobility tickets are sealed under a new key; the ones already out still open.
        mobility.rotate()
        postContexts()
        if stateDirectory != nil {
            let keys = journalKeys()
            for mailbox in mailboxes { mailbox.post(.journalKeys(keys)) }
        }
    }

    /// The keys a state journal keeps, so that after a crash a nonce, a mobility ticket, a TLS
    /// session ticket or a DTLS cookie issued before it is still good (docs/state-journal.md).
    func journalKeys() -> [JournalKey] {
        [JournalKey(name: StateDirectory.nonceKeyName, bytes: nonceKey)] + mobility.exportedKeys()
            + streams.exportedKeys()
    }

    /// Hands every loop a context built from the running configuration and drain state.
    func postContexts() {
        for (index, mailbox) in mailboxes.enumerated() { mailbox.post(.context(makeContext(thread: index))) }
    }

    var readyStatus: String {
        drain.active ? "draining" : "serving \(activeAllocations()) allocations"
    }
}
