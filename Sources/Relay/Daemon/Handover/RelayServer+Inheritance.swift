import Foundation
import Glibc
import Logging
import RelayCore

/// The heir's side of a live upgrade (docs/live-upgrade.md): a relayd started by another with
/// `RELAYD_HANDOVER_FD` set receives that relayd's sockets and state before it starts, and says
/// it serves once every loop and listener is up.
extension RelayServer {
    /// What the running relayd hands this process, if it was started as an heir; nil otherwise.
    /// Blocks until everything arrived (at most 30 s).
    public static func inherit(configuration: RelayConfiguration) throws(StartError) -> Inheritance? {
        guard let channel = Inheritance.channelFromEnvironment() else { return nil }
        let bounds = JournalBounds(settings: CoreSettings(configuration: configuration))
        do {
            return try Inheritance.receive(on: channel, bootID: handoverBootID, clock: EventLoop.now, bounds: bounds)
        } catch {
            throw StartError(description: "live upgrade: \(error.description)")
        }
    }

    /// Tells the running relayd that this process serves (it lets go and drains), and watches
    /// for its exit: until then the ports of what it kept are taken and reachable.
    func takeOverFromPredecessor(base: OpaquePointer) {
        guard let inheritance else { return }
        if Self.testFault == "after-serving" { failAfterServing(inheritance) }
        let unused = inheritance.closeUnused()
        do {
            try inheritance.channel.send(.ready(pid: getpid()))
        } catch {
            logger.error(
                "live upgrade: cannot tell pid \(inheritance.predecessor) that this process serves: \(error.description)",
                metadata: ["event": "upgrade_ready_failed"])
        }
        ports.setSibling(true)
        if !inheritance.drops.isEmpty {
            let reasons = inheritance.drops.sorted { "\($0.key)" < "\($1.key)" }
                .map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            // Lifetimes that ran out while the loops paused are expected; anything else is not.
            let expected: Set<JournalDropReason> = [
                .allocationExpired, .permissionExpired, .channelExpired, .reservationExpired,
            ]
            let level: Logger.Level = Set(inheritance.drops.keys).isSubset(of: expected) ? .notice : .warning
            logger.log(
                level: level, "live upgrade: the handed-over state left out \(reasons)",
                metadata: ["event": "upgrade_state_dropped", "reasons": "\(reasons)"])
        }
        logger.notice(
            "live upgrade: serving in place of pid \(inheritance.predecessor)",
            metadata: [
                "event": "upgrade_took_over", "predecessor": "\(inheritance.predecessor)",
                "allocations": "\(inheritance.state.allocations.count)", "unused_sockets": "\(unused)",
            ])
        let channel = inheritance.channel
        handover.predecessorWatch = LoopEvent(base: base, readable: channel.fd) { [unowned self] in
            var byte: UInt8 = 0
            let got = recv(channel.fd, &byte, 1, Int32(MSG_DONTWAIT))
            guard got <= 0, got == 0 || (errno != EAGAIN && errno != EINTR) else { return }
            ports.setSibling(false)
            handover.predecessorWatch?.cancel()
            logger.notice(
                "live upgrade: pid \(inheritance.predecessor) has exited",
                metadata: ["event": "upgrade_predecessor_exited", "predecessor": "\(inheritance.predecessor)"])
        }
    }

    /// This process's binary as the kernel names it now (before a package upgrade replaces the
    /// file); the path it was started by when that cannot be read.
    static func currentExecutable() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return CommandLine.arguments.first ?? "relayd" }
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `RELAYD_TEST_UPGRADE_FAULT=after-serving` in the environment makes an heir give up after
    /// its loops served for a moment, the latest an upgrade can fail (docs/live-upgrade.md,
    /// "What to know"): the test suite's way to reach the running relayd's late
    /// failure path. Nothing else reads it.
    static let testFault = getenv("RELAYD_TEST_UPGRADE_FAULT").map { String(cString: $0) }

    private func failAfterServing(_ inheritance: Inheritance) -> Never {
        usleep(300_000)
        logger.error(
            "live upgrade: giving up after serving, as RELAYD_TEST_UPGRADE_FAULT asks",
            metadata: ["event": "upgrade_test_fault"])
        try? inheritance.channel.send(.failed("RELAYD_TEST_UPGRADE_FAULT=after-serving"))
        _exit(75)
    }
}
