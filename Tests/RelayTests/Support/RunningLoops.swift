import CLibevent
import Dispatch
import Foundation
import Logging
import RelayCore
import StunCodec
import Synchronization

@testable import CoreTestSupport
@testable import Relay

/// Real loop threads, as `RelayServer` runs them: each an `EventLoop` with its `StreamTransport`,
/// created and run on its own thread, sharing one admission ledger and relayed-address directory.
/// Loop `i` listens for TURN over TCP on its own port of 127.0.0.1 (`ports[i]`), so a test
/// decides which loop each client lands on.
final class RunningLoops: @unchecked Sendable {
    let ports: [UInt16]
    /// Each loop's `event_base`, as an integer, once it runs (for `stop`).
    private let bases = Locked<[Int: UInt]>([:])
    private let finished: [DispatchSemaphore]
    private let ready = DispatchSemaphore(value: 0)

    /// `configure` runs on each loop's thread once its loop started, before it runs.
    init(count: Int = 2, configure: @escaping @Sendable (_ index: Int, EventLoop) -> Void = { _, _ in }) throws {
        evthread_use_pthreads()
        let relayBase = try DaemonIntegrationTests.freeRelayRange()
        var ports: [UInt16] = []
        for _ in 0..<count { ports.append(try StreamTestClient.freePort()) }
        self.ports = ports
        finished = (0..<count).map { _ in DispatchSemaphore(value: 0) }
        let ledger = LocalAdmissionLedger()
        let directory = RelayedAddressDirectory()
        let pool = RelayPortPool(range: relayBase...relayBase + 99, addresses: [.ipv4Loopback])
        let logger = Logger(label: "relayd.loop-tests") { _ in SwiftLogNoOpLogHandler() }
        let mailboxes = (0..<count).map { _ in LoopMailbox() }
        for index in 0..<count {
            var c = RelayConfiguration()
            c.noAuth = true
            c.noTLS = true
            // Peers on 127.0.0.1 besides the relayed addresses (a test's UDP peer socket).
            c.allowLoopbackPeers = true
            c.listeningIPs = [.ipv4Loopback]
            c.listeningPort = ports[index]
            c.relayIPs = [.ipv4Loopback]
            c.minPort = relayBase
            c.maxPort = relayBase + 99
            let context = CoreContext(
                configuration: c, nonceKey: Array(0..<32), ledger: ledger, directory: directory, threadIndex: index,
                threadCount: count, ports: pool)
            let service = StreamService(configuration: c, logger: logger)
            let done = finished[index]
            let thread = Thread { [self] in
                let loop = EventLoop(
                    context: context, logger: logger,
                    wiring: LoopWiring(index: LoopIndex(index), mailboxes: mailboxes, streams: service))
                let failure = loop.start(udp: [])
                precondition(failure == nil, "loop \(index): \(failure ?? "")")
                configure(index, loop)
                self.bases.withLock { $0[index] = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(loop.base))) }
                self.ready.signal()
                loop.run()
                loop.shutdownTransports()
                done.signal()
            }
            thread.name = "relayd-test-loop-\(index)"
            thread.start()
        }
        for _ in 0..<count { ready.wait() }
    }

    /// Asks loop `index` to return from its run (event_base_loopexit, safe from any thread) and
    /// waits until its thread has shut its transport down; false if that took over 10 s.
    @discardableResult
    func stop(_ index: Int) -> Bool {
        guard let raw = bases.withLock({ $0.removeValue(forKey: index) }) else { return true }
        event_base_loopexit(OpaquePointer(bitPattern: raw), nil)
        return finished[index].wait(timeout: .now() + 10) == .success
    }

    /// Stops every loop still running; false if one did not stop in time.
    @discardableResult
    func stopAll() -> Bool {
        (0..<ports.count).map { stop($0) }.allSatisfy { $0 }
    }

    /// A TURN client on loop `index`'s listener.
    func client(on index: Int) throws -> (StreamTestClient, TurnTestClient) {
        let stream = try StreamTestClient(port: ports[index])
        let turn = TurnTestClient(username: "", password: "") { try stream.exchange($0) }
        return (stream, turn)
    }
}
