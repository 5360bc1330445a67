import Foundation
import RelayCore
import StunCodec
import Synchronization
import Testing

@testable import CoreTestSupport
@testable import Relay

/// A relay socket whose read event libevent could not make at its allocation's first permission
/// (out of memory) is not left unread: the loop tries again every second, on its tick, and the
/// peer's datagrams reach the client then (docs/architecture.md, "Relay sockets").
@Suite(.serialized) struct RelayWatchRetryTests {
    /// How many watches are still to fail; shared with the loop's thread.
    final class Faults: Sendable {
        let left: Atomic<Int>
        init(_ count: Int) { left = Atomic(count) }
        /// True for the first `count` calls.
        func take() -> Bool { left.wrappingSubtract(1, ordering: .relaxed).oldValue > 0 }
    }

    @Test("A relay socket that could not be watched is watched on a later tick, and what its peer sent arrives")
    func failedWatchIsRetried() throws {
        let faults = Faults(1)
        let loops = try RunningLoops(count: 1) { _, loop in loop.relayWatchFault = { faults.take() } }
        defer { #expect(loops.stopAll(), "the loop did not stop") }
        let (client, turn) = try loops.client(on: 0)
        let peer = try UDPTestSocket()
        let relayed = try #require(try turn.allocate().xorRelayedAddress)
        // The first permission: the watch of the relay socket fails (it comes before the answer).
        #expect(try turn.channelBind(0x4000, to: peer.address).isSuccess)
        #expect(faults.left.load(ordering: .relaxed) <= 0, "the watch never failed")
        let payload = (0..<100).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        // It waits in the unwatched socket's smallest buffer until a tick (at most a second)
        // watches the socket.
        try peer.send(payload, to: relayed)
        let frame = try #require(client.readFrame(), "the peer's datagram never reached the client")
        #expect(Array(frame.prefix(4)) == [0x40, 0x00, 0x00, 100])
        #expect(Array(frame.dropFirst(4).prefix(100)) == payload)
        // Watched now, with its full buffer: a burst goes straight through.
        for _ in 0..<20 { try peer.send(payload, to: relayed) }
        for _ in 0..<20 { #expect(client.readFrame().map { Array($0.dropFirst(4).prefix(100)) } == payload) }
    }
}
