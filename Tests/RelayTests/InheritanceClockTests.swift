import Foundation
import Glibc
import RelayCore
import StunCodec
import Synchronization
import Testing

@testable import CoreTestSupport
@testable import Relay

/// The heir's reading of a live upgrade's snapshot (docs/live-upgrade.md): the running relayd
/// stamps it after the heir's hello, once its loops paused, so the heir reads its clock only
/// when the snapshot is whole. A clock read at the hello would find the records "written after
/// now" whenever a second began in between, and leave every allocation out.
@Suite struct InheritanceClockTests {
    /// The seconds of a `CLOCK_BOOTTIME` the test moves on.
    private final class TestClock: Sendable {
        let second = Atomic<Int64>(86_400)
        func now() -> Int64 { second.load(ordering: .sequentiallyConsistent) }
    }

    private static func allocation(_ id: UInt64, expiresAt: Int64) -> JournalAllocation {
        JournalAllocation(
            sessionID: id,
            fiveTuple: FiveTuple(client: .literal("192.0.2.1:40001"), server: .literal("10.0.0.5:3478"), transport: .udp),
            main: .init(address: .literal("10.0.0.5:50001"), expiresAt: expiresAt), username: "1700003600:alice",
            user: "alice", key: Array(repeating: 7, count: 16), transactionID: TransactionID(high: 1, low: 2))
    }

    @Test("A snapshot stamped in the second after the heir's hello keeps every allocation")
    func snapshotAfterASecondBoundary() throws {
        let boot = BootID(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
        let clock = TestClock()
        let (running, heirEnd) = try HandoverChannel.pair()
        let heir = HandoverChannel(fd: heirEnd)
        let start = clock.now()
        let snapshot = try JournalWriter.compacted(
            JournalState(allocations: [9: Self.allocation(9, expiresAt: start + 600)]), bootID: boot, now: start + 1,
            streamClients: true)
        // The running relayd's side: it answers the hello in the next second, as a pause that
        // crossed a second boundary does.
        let runningSide = Thread {
            guard let (hello, _) = try? running.receive(until: HandoverChannel.monotonicMillis() + 5000),
                case .hello = hello
            else { return }
            clock.second.store(start + 1, ordering: .sequentiallyConsistent)
            try? running.send(.state(snapshot))
            try? running.send(.done(sockets: 0, stateBytes: UInt32(snapshot.count), blocks: 0))
        }
        runningSide.start()
        let inheritance = try Inheritance.receive(on: heir, bootID: boot, clock: clock.now, bounds: JournalBounds(), seconds: 5)
        #expect(inheritance.drops.isEmpty, "left out: \(inheritance.drops)")
        #expect(inheritance.state.allocations.keys.sorted() == [9])
        #expect(inheritance.state.allocations[9]?.main.expiresAt == start + 600)
    }

    @Test("An allocation whose lifetime ran out before the reading is left out and said so")
    func expiredIsReported() throws {
        let boot = BootID(high: 5, low: 6)
        let clock = TestClock()
        let (running, heirEnd) = try HandoverChannel.pair()
        let heir = HandoverChannel(fd: heirEnd)
        let now = clock.now()
        let snapshot = try JournalWriter.compacted(
            JournalState(allocations: [
                1: Self.allocation(1, expiresAt: now + 600), 2: Self.allocation(2, expiresAt: now),
            ]), bootID: boot, now: now - 1, streamClients: true)
        // Everything is queued before the hello is read: the channel is a socket pair.
        try running.send(.state(snapshot))
        try running.send(.done(sockets: 0, stateBytes: UInt32(snapshot.count), blocks: 0))
        let inheritance = try Inheritance.receive(on: heir, bootID: boot, clock: clock.now, bounds: JournalBounds(), seconds: 5)
        #expect(inheritance.state.allocations.keys.sorted() == [1])
        #expect(inheritance.drops == [.allocationExpired: 1])
    }
}
