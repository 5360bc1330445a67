import RelayCore
import CLibevent
import COpenSSL
import FastPath
import Foundation
import Glibc
import Logging
import StunCodec
import Synchronization

/// The running daemon: one `EventLoop` thread per core (`relay-threads`), each with its own
/// SO_REUSEPORT listeners, plus the main thread's loop for signals and the HTTP service
/// (credentials, metrics, health). SIGHUP reloads the configuration; SIGTERM/SIGINT drain and
/// exit, SIGUSR1 drains without exiting.
public final class RelayServer {
    /// The running configuration; replaced (on the main thread) by a reload.
    public internal(set) var configuration: RelayConfiguration
    var logger: Logger
    /// The node's admission: quotas, `bps-capacity` and blocks (docs/architecture.md, "Admission").
    let admission: LocalAdmissionLedger
    let reservations = ReservationTable()
    /// The peer connections of TCP allocations, shared by the loops (docs/tcp-relay.md).
    let tcpConnections = TCPConnectionTable()
    let directory = RelayedAddressDirectory()
    /// The node's relay ports, shared by the loops; reconfigured on reload.
    let ports: RelayPortPool
    let nonceKey: [UInt8]
    /// The `state-dir` (docs/state-journal.md), when set and usable.
    let stateDirectory: StateDirectory?
    /// The UDP allocations read back from it, by the loop each client's datagrams reach.
    var restored: [[JournalAllocation]]
    /// EVEN-PORT reservations kept by the state journal or handed over, for loop 0.
    let restoredReservations: [UInt64: JournalReservation]
    /// Journals the state directory refused at start-up.
    let refusedJournals: UInt64
    /// Mobility tickets' keys and owners (docs/mobility.md); the key rotates on SIGHUP.
    let mobility = MobilityTickets()
    let interfaceAddresses: [IPAddress]
    /// Addresses the UDP listeners bind, resolved from `listening-ip` or the interfaces.
    public let listenAddresses: [TransportAddress]
    let loops = SharedState<[UInt]>([])
    /// One per loop thread: how the main thread hands it a new context.
    let mailboxes: [LoopMailbox]
    let threadCount: Int
    /// TCP/TLS listeners, the current TLS context and the connection limits, shared by the loops.
    let streams: StreamService
    /// Each loop thread's latest metrics snapshot, summed by `/metrics`.
    let metrics: MetricsRegistry
    /// What `/readyz` reports.
    public let health = ServiceHealth()
    /// Per-source-IP limits shared by the loops (docs/rate-limits.md).
    var sourceLimits: SourceLimits
    /// coturn's user database, when `userdb` is set (docs/userdb.md).
    var userDatabase: UserDatabaseState?
    /// systemd's notification socket (READY, RELOADING, STOPPING, WATCHDOG), when run under it;
    /// silenced once a live upgrade's heir is the main process.
    public internal(set) var notifier: SystemdNotifier
    /// What a live upgrade handed this process, when it is the heir (docs/live-upgrade.md).
    let inheritance: Inheritance?
    /// Live upgrades this process started (main thread).
    var handover = HandoverState()
    /// The binary a live upgrade starts: this one's path as it was at start-up.
    let executablePath: String
    /// This process handed over to an heir: it serves only what could not move, and leaves the
    /// pid file to the heir.
    public var handedOver: Bool { handover.done }
    /// `-c FILE` and options to read again on SIGHUP; nil reloads only the TLS certificate.
    public var reloadArguments: [String]?
    /// Runs on the main thread at each SIGHUP before the configuration is read (log reopening).
    public var onReload: (() -> Void)?
    /// Runs on the main thread once every listener is up.
    public var onStarted: (() -> Void)?
    /// Main-thread state of a drain, the main loop and the HTTP service.
    var drain = DrainState()
    var mainBase: OpaquePointer?
    var http: HTTPService?
    /// The kernel fast path, when `kernel-offload` is on or auto and it could attach (docs/kernel-fast-path.md).
    var fastPath: KernelFastPath?
    /// The cluster (docs/cluster.md), when `cluster-redis` is set: the admission ledger the
    /// cores ask (quotas counted across nodes, redirects), and the agent on the main loop that
    /// keeps the node in the registry.
    let clusterLedger: ClusterAdmissionLedger?
    var clusterAgent: ClusterAgent?
    let startedAt = Int64(time(nil))
    /// Usage per tenant, user and hour (docs/usage.md), its journal in `state-dir`, and the
    /// main loop's timer that feeds both.
    let usage = UsageBook()
    var usageJournal: UsageJournal?
    var usageTimer: LoopEvent?
    /// Users the admin API blocked (docs/admin.md); outlives reloads.
    public var blocklist: UserBlocklist { admission.blocklist }
    /// Where blocks are kept beyond the process: `state-dir`, and the cluster's Redis.
    let blocks: BlockStore
    /// What the cores ask before they allocate: the cluster's ledger in a cluster, else the node's.
    var ledger: any AdmissionLedger { clusterLedger ?? admission }

    public init(
        configuration: RelayConfiguration, logger: Logger, notifier: SystemdNotifier = SystemdNotifier(),
        inheritance: Inheritance? = nil
    ) {
        evthread_use_pthreads()
        self.inheritance = inheritance
        executablePath = Self.currentExecutable()
        let interfaces = InterfaceAddresses.current()
        let c = configuration.resolvingAddresses(interfaces: interfaces)
        self.configuration = c
        self.logger = logger
        self.notifier = notifier
        self.interfaceAddresses = interfaces
        admission = LocalAdmissionLedger(limits: .init(configuration: c))
        sourceLimits = SourceLimits(configuration: c)
        ports = RelayPortPool(
            range: c.minPort...c.maxPort, addresses: RelayAddress.mappings(configuration: c).map(\.bound),
            start: UInt64.random(in: 0...UInt64(UInt16.max)))
        var key = [UInt8](repeating: 0, count: 32)
        var g = SystemRandomNumberGenerator()
        for i in key.indices { key[i] = g.next() }
        threadCount = max(1, c.relayThreads ?? Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        let state = c.stateDir.flatMap { StateDirectory.open(path: $0, logger: logger) }
        stateDirectory = state
        // An heir takes the state it was handed; the journals are the running process's until
        // it lets go (docs/live-upgrade.md).
        let recovered = inheritance == nil ? state.map {
            $0.recover(now: EventLoop.now(), bounds: JournalBounds(settings: CoreSettings(configuration: c)))
        } : nil
        // A nonce issued before a crash or an upgrade stays good after it (unless the cluster
        // fixes the key).
        let keys = inheritance?.state.keys ?? recovered?.state.keys ?? []
        let keptNonceKey = keys.first { $0.name == StateDirectory.nonceKeyName && $0.bytes.count == 32 }
        nonceKey = ClusterNode.sharedNonceKey(configuration: c) ?? keptNonceKey?.bytes ?? key
        restored = Array(repeating: [], count: threadCount)
        restoredReservations = (inheritance?.state ?? recovered?.state)?.reservations ?? [:]
        refusedJournals = UInt64(recovered?.refusedFiles.count ?? 0)
        // A TCP client's allocation is restored with its connection, on the loop that gets it.
        for allocation in (inheritance?.state ?? recovered?.state)?.allocations.values.map({ $0 }) ?? []
        where allocation.fiveTuple.transport == .udp {
            let loop = ListenerSelector.loop(for: allocation.fiveTuple.client, loops: threadCount)
            restored[loop].append(allocation)
        }
        if let recovered { Self.log(recovered, of: state!, logger: logger) }
        // A mobility ticket issued before a crash or a live upgrade still moves its allocation
        // after it.
        mobility.adopt(keys)
        blocks = BlockStore(blocklist: admission.blocklist, directory: state?.path, logger: logger)
        blocks.load(now: Int64(time(nil)))
        if let inheritance {
            // The blocks handed over are the set in force (docs/admin.md); who set each and when
            // come from the blocks file, when there is one.
            let known = Dictionary(admission.blocklist.list(now: 0).map { ($0.user, $0) }) { first, _ in first }
            let handed = inheritance.blocks.map { entry in
                let origin = known[entry.user]
                return UserBlocklist.Entry(
                    user: entry.user, until: entry.until, setBy: origin?.setBy ?? "", setAt: origin?.setAt ?? 0)
            }
            admission.blocklist.replace(with: handed, now: Int64(time(nil)))
        }
        let mailboxes = (0..<threadCount).map { _ in LoopMailbox() }
        self.mailboxes = mailboxes
        clusterLedger = c.clusterRedis.map { [admission] _ in
            ClusterAdmissionLedger(local: admission, clusterTotalQuota: c.clusterTotalQuota) { ticket, decision in
                if mailboxes.indices.contains(ticket.loop.value) {
                    mailboxes[ticket.loop.value].post(.admission(AdmissionAnswer(ticket: ticket, decision: decision)))
                }
            }
        }
        var ports = [c.listeningPort]
        if let alt = c.effectiveAltListeningPort { ports.append(alt) }
        listenAddresses = c.noUDP ? [] : c.listeningIPs.flatMap { ip in ports.map { TransportAddress(ip: ip, port: $0) } }
        streams = StreamService(configuration: c, logger: logger, inheritedKeys: keys)
        metrics = MetricsRegistry(threads: threadCount, carried: inheritance?.counters ?? CarriedCounters())
    }

    func makeContext(thread index: Int) -> CoreContext {
        var context = CoreContext(
            configuration: effectiveConfiguration, nonceKey: nonceKey, ledger: ledger, reservationTable: reservations,
            directory: directory, interfaceAddresses: interfaceAddresses,
            threadIndex: index, threadCount: threadCount, sourceLimits: sourceLimits,
            mobility: mobility, ports: ports, tcpConnections: tcpConnections)
        context.draining = drain.active
        if let credentials = userDatabase?.credentials { context.credentials = credentials }
        if let tenants = userDatabase?.tenants { context.tenants = tenants }
        return context
    }

    struct StartState: Sendable {
        /// Loops whose listeners are bound, in loop order.
        var listening = 0
        var ready = 0
        var failure: String? = nil
    }

    /// Failure to start: a listener address that cannot be bound.
    public struct StartError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts the loop threads and blocks until SIGTERM or SIGINT; returns after every loop ended.
    public func run() throws(StartError) {
        // A launcher may hand us a blocked signal mask; the signals we serve must get through,
        // and the loop threads inherit the mask set here.
        var wanted = sigset_t()
        sigemptyset(&wanted)
        for sig in [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2] { sigaddset(&wanted, sig) }
        pthread_sigmask(SIG_UNBLOCK, &wanted, nil)
        if let inheritance, inheritance.loops > 0, inheritance.loops != threadCount {
            throw StartError(
                description: "the running relayd has \(inheritance.loops) loop threads and this configuration "
                    + "\(threadCount): a live upgrade keeps relay-threads (restart to change it)")
        }
        try streams.prepare()
        if let inheritance {
            // Listeners are restart-only: an heir that would open others is refused, and the
            // running relayd serves on (docs/live-upgrade.md).
            let wanted = Inheritance.describe(
                udp: listenAddresses, dtls: streams.dtlsAddresses, tcp: streams.tcpAddresses + streams.apiOnlyAddresses,
                tls: streams.tlsOnlyAddresses,
                loops: threadCount)
            let handed = inheritance.turnListeners()
            guard wanted == handed else {
                throw StartError(
                    description: "the running relayd listens on other addresses than this configuration "
                        + "(\(handed.subtracting(wanted).count) of its listeners are not in it, "
                        + "\(wanted.subtracting(handed).count) of this configuration's are new): a live upgrade "
                        + "keeps the listeners (restart to change them)")
            }
        }
        // The per-source limiters go on from the running relayd's buckets (docs/live-upgrade.md).
        inheritance?.restoreLimiters(into: sourceLimits, now: EventLoop.now())
        if configuration.kernelOffload != .off, let handed = inheritance?.fastPath() {
            // An heir takes the running relayd's program over; a failure stops it, whatever
            // kernel-offload says, and the running relayd serves on (docs/live-upgrade.md).
            fastPath = try KernelFastPath.start(
                configuration: configuration, interfaceAddresses: interfaceAddresses, taking: handed, logger: logger)
        } else {
            switch configuration.kernelOffload {
            case .off:
                break
            case .on:
                fastPath = try KernelFastPath.start(
                    configuration: configuration, interfaceAddresses: interfaceAddresses, logger: logger)
            case .auto:
                do {
                    fastPath = try KernelFastPath.start(
                        configuration: configuration, interfaceAddresses: interfaceAddresses, logger: logger)
                } catch {
                    logger.warning(
                        "kernel offload not available, relaying in user space",
                        metadata: ["event": "offload_unavailable", "reason": "\(error.description)"])
                }
            }
        }
        let fastPath = fastPath
        let splice = try KernelSplice.start(configuration: configuration, logger: logger)
        startUserDatabase()
        defer { stopUserDatabase() }
        openUsageJournal()
        // Whatever ends, its usage is written once the loops are done.
        defer { flushUsage() }
        let started = SharedState<StartState>(StartState())
        let threads = threadCount
        let finished = DispatchGroup()
        for index in 0..<threadCount {
            finished.enter()
            let context = makeContext(thread: index)
            let addresses = listenAddresses
            let logger = logger
            let loops = loops
            let streams = streams
            var wiring = LoopWiring(
                index: LoopIndex(index), mailboxes: mailboxes, streams: streams, fastPath: fastPath, splice: splice,
                metrics: metrics.slots[index],
                journal: stateDirectory.map {
                    LoopWiring.Journal(
                        path: $0.journalPath(loop: index), bootID: $0.bootID,
                        keys: journalKeys(),
                        refusedJournals: index == 0 ? refusedJournals : 0)
                }, inheritance: inheritance, restore: restored[index],
                reservations: index == 0 ? restoredReservations : [:])
            let usage = usage
            wiring.sessionObservers = { [UsageRecorder(book: usage)] }
            if let watcher = userDatabase?.watcher {
                let mailboxes = mailboxes
                wiring.lookUpUser = { lookup in
                    watcher.lookUp(lookup) { result in
                        guard mailboxes.indices.contains(lookup.loop.value) else { return }
                        mailboxes[lookup.loop.value].post(.userLookedUp(lookup, result))
                    }
                }
            }
            let loopWiring = wiring
            let thread = Thread {
                let loop = EventLoop(context: context, logger: logger, wiring: loopWiring)
                // Loop i's listener must be member i of each SO_REUSEPORT group: the selector
                // picks members by index (`ListenerSelector`), so the loops bind in turn.
                while started.withLock({ $0.listening }) < index { usleep(200) }
                let failure = loop.start(udp: addresses)
                started.withLock { $0.listening += 1 }
                if failure == nil { loop.restore() }
                loops.withLock { $0.append(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(loop.base)))) }
                started.withLock {
                    $0.ready += 1
                    if $0.failure == nil { $0.failure = failure }
                }
                // No loop reads before every loop's listeners are in the SO_REUSEPORT group and
                // every restored allocation is in place: until then the group's selector would
                // send a client's datagrams to another loop than the one holding its allocation.
                while started.withLock({ $0.ready }) < threads { usleep(200) }
                if failure == nil { loop.run() }
                loop.shutdownTransports()
                // OpenSSL keeps per-thread state (error queue, DRBG) that it frees when the thread
                // exits. Free it here instead: once the main thread is let go, the process may
                // exit, and OpenSSL's exit handler must not race this thread's own cleanup.
                OPENSSL_thread_stop()
                finished.leave()
            }
            thread.name = "relayd-loop-\(index)"
            thread.start()
        }
        while started.withLock({ $0.ready }) < threadCount { usleep(1000) }
        if let failure = started.withLock({ $0.failure }) {
            stopLoops()
            finished.wait()
            throw StartError(description: failure)
        }
        let base = event_base_new()!
        mainBase = base
        defer {
            mainBase = nil
            event_base_free(base)
        }
        let http = HTTPService(
            base: base, configuration: configuration, interfaceAddresses: interfaceAddresses, registry: metrics,
            health: health, logger: logger)
        self.http = http
        http.inheritance = inheritance
        http.apiHandoff = streams.apiHandoff
        defer {
            http.close()
            self.http = nil
        }
        do {
            for warning in try http.start() { logger.warning("\(warning)", metadata: ["event": "http_warning"]) }
        } catch {
            stopLoops()
            finished.wait()
            throw error
        }
        let streams = streams
        let userDatabaseWatcher = userDatabase?.watcher
        let admission = admission
        let usage = usage
        let tenantNames = { [unowned self] in configuration.tenants.map(\.name) }
        http.router.server = {
            var server = ServerMetrics(
                process: .current(), openStreamConnections: streams.limiter.total,
                certificateExpiry: streams.tls.value?.notAfter)
            server.userDatabase = userDatabaseWatcher?.metrics
            server.tenants = ServerMetrics.tenantRows(names: tenantNames(), counts: admission.tenantCounts)
            server.usageRecords = usage.totals
            server.tenantUsage = ServerMetrics.tenantUsageRows(names: tenantNames(), totals: usage.tenantTotals)
            return server
        }
        watchUserDatabase(base: base)
        // Freed before the main event base is (its deferred free runs after this one); the
        // watcher's threads stop later, with `stopUserDatabase`.
        defer { userDatabase?.timer?.cancel() }
        watchUsage(base: base)
        defer { usageTimer?.cancel() }
        http.router.usage = usage
        http.router.admin = self
        startCluster(base: base, http: http)
        defer { stopCluster() }
        // Runs before the cluster stops: the last records reach the Redis stream too.
        defer { finishUsage(base: base) }
        health.markListening()
        logStartup(http: http)
        serveSignals(on: base)
        health.setDraining(true)
        if !drain.exitWhenDone { notifier.notifyStopping(status: "stopping") }
        logger.info("shutting down", metadata: ["event": "shutdown"])
        stopLoops()
        finished.wait()
        fastPath?.detachAll()
    }

    func stopLoops() {
        for raw in loops.value {
            event_base_loopexit(OpaquePointer(bitPattern: raw), nil)
        }
    }

    /// Runs the main thread's event loop (signals, the HTTP service, the systemd watchdog) until
    /// a drain ends or a second SIGTERM/SIGINT.
    func serveSignals(on base: OpaquePointer) {
        signal(SIGPIPE, SIG_IGN)
        var events = [
            LoopEvent(base: base, signal: SIGTERM) { [unowned self] in stopSignal("SIGTERM") },
            LoopEvent(base: base, signal: SIGINT) { [unowned self] in stopSignal("SIGINT") },
            LoopEvent(base: base, signal: SIGUSR1) { [unowned self] in startDrain(exitWhenDone: false, signal: "SIGUSR1") },
            LoopEvent(base: base, signal: SIGHUP) { [unowned self] in reload() },
            LoopEvent(base: base, signal: SIGUSR2) { [unowned self] in _ = upgrade(trigger: "SIGUSR2") },
            // The status page's rates (docs/admin.md).
            LoopEvent(base: base, every: timeval(tv_sec: 1, tv_usec: 0)) { [unowned self] in
                http?.router.sampleTraffic(monotonic: HTTPListener.monotonicSeconds())
                // Blocks changed in the last second reach state-dir (docs/admin.md).
                blocks.saveIfDirty(now: Int64(time(nil)))
            },
        ]
        if configuration.certCheckInterval > 0 {
            // Renewed certificates and rotated secret files are taken without a SIGHUP
            // (docs/tls.md, docs/configuration.md); a reload that fails is tried again.
            let c = configuration
            var watch = CertificateWatch(paths: Self.watchedFiles(c))
            var retry = false
            events.append(
                LoopEvent(base: base, every: timeval(tv_sec: c.certCheckInterval, tv_usec: 0)) { [unowned self] in
                    guard watch.changed() || retry else { return }
                    logger.notice(
                        "certificate or secret files changed: reloading", metadata: ["event": "certificate_files_changed"])
                    retry = !reload()
                    if !retry { watch = CertificateWatch(paths: Self.watchedFiles(configuration)) }
                })
        }
        if let interval = notifier.watchdogInterval {
            let half = interval / 2
            let micros = half.components.seconds * 1_000_000 + half.components.attoseconds / 1_000_000_000_000
            let every = timeval(tv_sec: Int(micros / 1_000_000), tv_usec: Int(max(micros % 1_000_000, 1000)))
            events.append(LoopEvent(base: base, every: every) { [unowned self] in notifier.notifyWatchdog() })
        }
        // Only now, with every handler in place, may systemd (or anyone) send signals.
        onStarted?()
        takeOverFromPredecessor(base: base)
        notifier.notifyReady(status: readyStatus)
        event_base_dispatch(base)
        for event in events { event.cancel() }
        blocks.saveIfDirty(now: Int64(time(nil)))
        handover.predecessorWatch = nil
        handover.drainStart = nil
        drain.timer = nil
        // Shutting down already: a late SIGTERM/SIGINT must not kill the process mid-cleanup.
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
    }

    func logStartup(http: HTTPService) {
        let auth: String
        if configuration.noAuth {
            auth = "none"
        } else if configuration.useAuthSecret {
            auth = "rest secrets: \(configuration.staticAuthSecrets.count), static users: \(configuration.users.count)"
        } else {
            auth = "long-term, static users: \(configuration.users.count)"
        }
        let relays = RelayAddress.mappings(configuration: configuration).map { r in
            r.bound == r.advertised ? "\(r.bound)" : "\(r.bound) advertised as \(r.advertised)"
        }
        logger.info(
            "relayd started",
            metadata: [
                "event": "started", "version": "\(RelaydVersion.string)", "threads": "\(threadCount)",
                "udp_listeners": "\(listenAddresses.map(\.description).joined(separator: ", "))",
                "tcp_listeners": "\(streams.tcpAddresses.map(\.description).joined(separator: ", "))",
                "tls_listeners": "\(streams.tlsAddresses.map(\.description).joined(separator: ", "))",
                "relay_addresses": "\(relays.joined(separator: ", "))",
                "relay_ports": "\(configuration.minPort)-\(configuration.maxPort)", "realm": "\(configuration.realm)",
                "auth": "\(auth)", "http_api": "\(http.apiTLS == nil ? "http" : "https")://\(http.addresses.api)",
                "prometheus": "\(configuration.prometheus ? "\(http.addresses.prometheus ?? http.addresses.api)" : "off")",
                "api_keys": "\(configuration.apiKeys.count)",
            ])
    }
}
