import CLibevent
import Foundation
import Glibc
import Logging
import StunCodec
import Synchronization

/// The running daemon: one `EventLoop` thread per core (`relay-threads`), each with its own
/// SO_REUSEPORT listeners, plus the main thread's loop for signals. SIGTERM/SIGINT stop the loops
/// and end every allocation.
public final class RelayServer {
    public let configuration: RelayConfiguration
    let logger: Logger
    let quota: QuotaTracker
    let nonceKey: [UInt8]
    let interfaceAddresses: [IPAddress]
    /// Addresses the UDP listeners bind, resolved from `listening-ip` or the interfaces.
    public let listenAddresses: [TransportAddress]
    let loops = SharedState<[UInt]>([])
    let threadCount: Int

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
    }

    func makeContext(thread index: Int) -> CoreContext {
        CoreContext(
            configuration: configuration, nonceKey: nonceKey, quota: quota, interfaceAddresses: interfaceAddresses,
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
        let started = SharedState<StartState>(StartState())
        let finished = DispatchGroup()
        for index in 0..<threadCount {
            finished.enter()
            let context = makeContext(thread: index)
            let addresses = listenAddresses
            let logger = logger
            let loops = loops
            let thread = Thread {
                let loop = EventLoop(context: context, logger: logger)
                var failure: String? = nil
                for address in addresses where !loop.addUDPListener(address) {
                    failure = "cannot bind UDP \(address): \(String(cString: strerror(errno)))"
                    break
                }
                loops.withLock { $0.append(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(loop.base)))) }
                started.withLock {
                    $0.ready += 1
                    if $0.failure == nil { $0.failure = failure }
                }
                if failure == nil { loop.run() }
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
        logStartup()
        waitForSignal()
        logger.info("shutting down", metadata: ["event": "shutdown"])
        stopLoops()
        finished.wait()
    }

    func stopLoops() {
        for raw in loops.value {
            event_base_loopexit(OpaquePointer(bitPattern: raw), nil)
        }
    }

    /// Blocks the main thread in its own event loop until SIGTERM or SIGINT.
    func waitForSignal() {
        signal(SIGPIPE, SIG_IGN)
        let base = event_base_new()
        defer { event_base_free(base) }
        var events: [OpaquePointer] = []
        for sig in [SIGTERM, SIGINT] {
            let event = event_new(base, sig, Int16(EV_SIGNAL | EV_PERSIST), { _, _, arg in
                event_base_loopexit(OpaquePointer(arg), nil)
            }, UnsafeMutableRawPointer(base))!
            event_add(event, nil)
            events.append(event)
        }
        event_base_dispatch(base)
        for event in events { event_free(event) }
    }

    func logStartup() {
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
                "relay_addresses": "\(relays.joined(separator: ", "))",
                "relay_ports": "\(configuration.minPort)-\(configuration.maxPort)", "realm": "\(configuration.realm)",
                "auth": "\(auth)",
            ])
    }
}
