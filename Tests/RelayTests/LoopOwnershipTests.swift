import Dispatch
import Foundation
import Logging
import RelayCore
import StunCodec
import Testing

@testable import Relay

/// A core belongs to the thread of its loop (docs/architecture.md, "Threads"): the loop tells
/// its core which thread that is, and debug builds check it at every entry point.
@Suite struct LoopOwnershipTests {
    @Test("The loop's owner check holds on the thread that made the loop, and not on another")
    func ownerCheck() throws {
        var c = RelayConfiguration()
        c.noAuth = true
        c.noTLS = true
        c.listeningIPs = [.ipv4Loopback]
        c.relayIPs = [.ipv4Loopback]
        let logger = Logger(label: "relayd.ownership-tests") { _ in SwiftLogNoOpLogHandler() }
        let loop = EventLoop(
            context: CoreContext(configuration: c, nonceKey: Array(0..<32), ledger: LocalAdmissionLedger()),
            logger: logger,
            wiring: LoopWiring(
                index: LoopIndex(0), mailboxes: [LoopMailbox()], streams: StreamService(configuration: c, logger: logger)))
        let check = try #require(loop.core.ownerCheck)
        #expect(check())
        let elsewhere = Locked<Bool?>(nil)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            elsewhere.withLock { $0 = check() }
            done.signal()
        }
        thread.start()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(elsewhere.withLock { $0 } == false)
    }
}
