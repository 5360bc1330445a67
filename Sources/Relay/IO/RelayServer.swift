import CLibevent
import Foundation
import Glibc
import Logging
import StunCodec
import Synchronization

/// The running daemon: one `EventLoop` thread per core (`relay-threads`), each with its own
/// SO_REUSEPORT listeners, plus the main thread's loop for signals and the HTTP service
/// (credentials, metrics, health). SIGTERM/SIGINT stop the loops and end every allocation.
public final class RelayServer {
    public let configuration: RelayConfiguration
    let logger: Logger
    let quota: QuotaTracker
    let reservations = ReservationTable()
    let nonceKey: [UInt8]
    let interfaceAddresses: [IPAddress]
    /// Addresses the UDP listeners bind, resolved from `listening-ip` or the interfaces.
    public let listenAddresses: [TransportAddress]
    let loops = SharedState<[UInt]>([])
    let threadCount: Int
    /// TCP/TLS listeners, the current TLS context and the connection limits, shared by the loops.
    let streams: StreamService
    /// Each loop thread's latest metrics snapshot, summed by `/metrics`.
    let metrics: MetricsRegistry
    /// What `/readyz` reports.
    public let health = ServiceHealth()

    public init(configuration: RelayConfiguration, logger: Logger) {
        evthread_use_pthreads()
        let interfaces = InterfaceAddresses.current()
        var c = configuration
        if c.listeningIPs.isEmpty { c.listeningIPs = interfaces }
        if c.relayIPs.isEmpty { c.relayIPs = c.listeningIPs.filter { !($0 == .ipv4Any || $0 == .ipv6Any) } }
        self.configuration = c
        self.logger = logger
        self.interfaceAddresses = interfaces
        quota = QuotaTracker(userQuota: c.userQuota, totalQuota: c.totalQuota)
        var key = [UInt8](repeating: 0, count: 32)
        var g = SystemRandomNumberGenerator()
        for i in key.indices { key[i] = g.next() }
        nonceKey = key
        var ports = [c.listeningPort]
        if let alt = c.altListeningPort { ports.append(alt) }
        listenAddresses = c.noUDP ? [] : c.listeningIPs.flatMap { ip in ports.map { TransportAddress(ip: ip, port: $0) } }
        threadCount = max(1, c.relayThreads ?? Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        streams = StreamService(configuration: c, logger: logger)
        metrics = MetricsRegistry(threads: threadCount)
    }

    func makeContext(thread index: Int) -> CoreContext {
        CoreContext(
            configuration: configuration, nonceKey: nonceKey, quota: quota, reservationTable: reservations, interfaceAddresses: interfaceAddresses,
            threadIndex: index, threadCount: threadCount)
    }

    struct StartState: Sendable {
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
        for sig in [SIGTERM, SIGINT, SIGHUP, SIGUSR1] { sigaddset(&wanted, sig) }
        pthread_sigmask(SIG_UNBLOCK, &wanted, nil)
        try streams.prepare()
        let started = SharedState<StartState>(StartState())
        let finished = DispatchGroup()
        for index in 0..<threadCount {
            finished.enter()
            let context = makeContext(thread: index)
            let addresses = listenAddresses
            let logger = logger
            let loops = loops
            let streams = streams
            let slot = metrics.slots[index]
            let thread = Thread {
                let loop = EventLoop(context: context, logger: logger)
                let transport = StreamTransport(loop: loop, service: streams)
                loop.onPublish = { core in
                    var snapshot = LoopMetrics(capturing: core, now: EventLoop.now())
                    transport.contribute(to: &snapshot)
                    slot.publish(snapshot)
                }
                loop.onPublish?(loop.core)
                var failure: String? = nil
                for address in addresses where !loop.addUDPListener(address) {
                    failure = "cannot bind UDP \(address): \(String(cString: strerror(errno)))"
                    break
                }
                if failure == nil { failure = transport.start() }
                loops.withLock { $0.append(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(loop.base)))) }
                started.withLock {
                    $0.ready += 1
                    if $0.failure == nil { $0.failure = failure }
                }
                if failure == nil { loop.run() }
                transport.shutdown()
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
        defer { event_base_free(base) }
        let http = HTTPService(
            base: base, configuration: configuration, interfaceAddresses: interfaceAddresses, registry: metrics,
            health: health, logger: logger)
        defer { http.close() }
        do {
            for warning in try http.start() { logger.warning("\(warning)", metadata: ["event": "http_warning"]) }
        } catch {
            stopLoops()
            finished.wait()
            throw error
        }
        health.markListening()
        logStartup(http: http)
        waitForSignal(on: base)
        health.setDraining(true)
        logger.info("shutting down", metadata: ["event": "shutdown"])
        stopLoops()
        finished.wait()
    }

    func stopLoops() {
        for raw in loops.value {
            event_base_loopexit(OpaquePointer(bitPattern: raw), nil)
        }
    }

    /// Runs the main thread's event loop (signals and the HTTP service) until SIGTERM or SIGINT.
    func waitForSignal(on base: OpaquePointer) {
        signal(SIGPIPE, SIG_IGN)
        var events: [OpaquePointer] = []
        for sig in [SIGTERM, SIGINT] {
            let event = event_new(base, sig, Int16(EV_SIGNAL | EV_PERSIST), { _, _, arg in
                event_base_loopexit(OpaquePointer(arg), nil)
            }, UnsafeMutableRawPointer(base))!
            event_add(event, nil)
            events.append(event)
        }
        events.append(addReloadSignal(to: base))
        event_base_dispatch(base)
        for event in events { event_free(event) }
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
                "auth": "\(auth)", "http_api": "\(http.addresses.api)",
                "prometheus": "\(configuration.prometheus ? "\(http.addresses.prometheus ?? http.addresses.api)" : "off")",
                "api_keys": "\(configuration.apiKeys.count)",
            ])
    }
}
