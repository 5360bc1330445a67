import Relay
import StunCodec

extension CrossLoopFixture {
    /// Checks once, outside timing, that A's ChannelData leaves loop 0 with nothing queued and
    /// reaches B's TCP connection from loop 1 as padded ChannelData on B's channel 0x4005.
    func validateHandOff() throws {
        loop0.core.handleClientPacket(toRemoteB, from: loop0.origin(RelayFixture.clientA), now: loop0.now)
        guard loop0.core.outbox.packets.isEmpty else { throw BenchError.invalidFixture("hand-off: loop 0 sent") }
        let packets = handOnce()
        defer { loop1.core.outbox.reset() }
        guard packets == 1, loop1.core.outbox.packets[0].route == .client(loop1.origin(RelayFixture.clientB)),
            loop1.core.outbox.packets[0].bytes.count == 104, loop1.core.outbox.packets[0].bytes[1] == 0x05
        else { throw BenchError.invalidFixture("cross-loop hand-off") }
    }

    /// Loop 1's side: takes what loop 0 posted and delivers it; the packets queued for clients.
    @inline(__always)
    func handOnce() -> Int {
        guard let inbox, let batch = inbox.take() else { return 0 }
        for record in batch.records {
            loop1.core.handleHandOff(
                to: record.target, from: record.source, buffer: batch.arena, payload: record.payload, now: loop1.now)
        }
        inbox.recycle(batch)
        return loop1.core.outbox.packets.count
    }
}

/// (i) Client A's ChannelData to the relayed address of TCP client B on another loop: posted to
/// that loop's inbox, taken there and framed for B's stream.
@inline(never)
func relayHandOff(_ f: CrossLoopFixture, iterations: Int) -> UInt64 {
    let origin = f.loop0.origin(RelayFixture.clientA)
    var sum: UInt64 = 0
    for _ in 0..<iterations {
        f.loop0.core.handleClientPacket(opaque(f.toRemoteB), from: origin, now: f.loop0.now)
        sum &+= UInt64(f.handOnce())
        f.loop1.core.outbox.reset()
    }
    return sum
}
