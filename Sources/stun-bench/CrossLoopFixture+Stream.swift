import Relay
import RelayCore
import StunCodec

/// (i)'s stand-in for TCP client B's connection: keeps the last packet queued on it in fixed
/// storage (a real connection copies it into its output queue), so the measured path is the
/// core's: directory lookup, checks, framing for the stream, the hand-over.
final class BenchStreamSink: StreamSink, @unchecked Sendable {
    private let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
    private(set) var count = 0
    private(set) var packets = 0

    var last: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: storage[..<count]) }

    func take(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count <= storage.count, let base = bytes.baseAddress else { return false }
        storage.baseAddress!.copyMemory(from: base, byteCount: bytes.count)
        count = bytes.count
        packets &+= 1
        return true
    }

    /// Loop 1 lists B's allocation with this sink.
    func install(owner: RelayCore, origin: ClientOrigin) {
        owner.streamHooks.sink = { [unowned self] candidate in candidate == origin ? self : nil }
    }

    /// What loop 0's I/O layer does at its flush: queues each `deliverToStream` packet on the
    /// connection it names.
    @inline(__always)
    static func executeDeliveries(of core: RelayCore) {
        for command in core.outbox.commands {
            if case .deliverToStream(let delivery) = command {
                _ = unsafeDowncast(delivery.sink, to: BenchStreamSink.self).take(delivery.bytes)
            }
        }
    }
}

extension CrossLoopFixture {
    /// Checks once, outside timing, that A's ChannelData leaves loop 0 with nothing queued in its
    /// outbox and is queued on B's connection as padded ChannelData on B's channel 0x4005.
    func validateStream() throws {
        guard let sink else { throw BenchError.invalidFixture("stream: no sink") }
        loop0.core.handleClientPacket(toRemoteB, from: loop0.origin(RelayFixture.clientA), now: loop0.now)
        BenchStreamSink.executeDeliveries(of: loop0.core)
        defer { loop0.core.outbox.reset() }
        guard loop0.core.outbox.packets.isEmpty, loop0.core.outbox.commands.count == 1, sink.packets == 1, sink.count == 104, sink.last[1] == 0x05,
            loop0.core.counters.shortCircuited == 1
        else { throw BenchError.invalidFixture("cross-loop stream write") }
    }
}

/// (i) Client A's ChannelData to the relayed address of TCP client B on another loop: looked up
/// in the shared directory, framed for B's stream on loop 0 and queued on B's connection.
@inline(never)
func relayToStream(_ f: CrossLoopFixture, iterations: Int) -> UInt64 {
    let origin = f.loop0.origin(RelayFixture.clientA)
    let before = f.sink?.packets ?? 0
    for _ in 0..<iterations {
        f.loop0.core.handleClientPacket(opaque(f.toRemoteB), from: origin, now: f.loop0.now)
        BenchStreamSink.executeDeliveries(of: f.loop0.core)
        f.loop0.core.outbox.reset()
    }
    return UInt64((f.sink?.packets ?? 0) - before)
}
