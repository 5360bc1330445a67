import Relay
import StunCodec

/// Two loop threads' cores sharing a relayed-address directory with an inbox per loop: client A
/// (UDP) on loop 0 bound by channel 0x4004 to the relayed address of client B, a TCP client on
/// loop 1, which bound 0x4005 back. A's ChannelData is posted to loop 1's inbox, and loop 1
/// frames it for B's stream (the cross-thread hand-off).
final class HandOffFixture {
    let loop0: RelayFixture
    let loop1: RelayFixture
    let inbox: HandOffInbox
    /// ChannelData on 0x4004, 100 bytes, from A on loop 0.
    let toRemoteB: UnsafeRawBufferPointer

    init() throws {
        let directory = RelayedAddressDirectory(loops: 2)
        let quota = QuotaTracker(userQuota: 0, totalQuota: 0)
        loop0 = try RelayFixture(loop: 0, of: 2, directory: directory, quota: quota)
        loop1 = try RelayFixture(loop: 1, of: 2, directory: directory, quota: quota, transportB: .tcp)
        inbox = directory.inboxes[1]
        let frame = UnsafeMutableRawBufferPointer.allocate(byteCount: 104, alignment: 8)
        ChannelDataMessage.writeHeader(into: frame, channelNumber: 0x4004, length: 100)
        for i in 4..<104 { frame[i] = UInt8(truncatingIfNeeded: i) }
        toRemoteB = UnsafeRawBufferPointer(frame)
        let remoteB = loop1.relayedB
        let localA = loop0.relayedA
        try loop0.request(.channelBind, from: RelayFixture.clientA) { w throws(StunEncodeError) in
            try w.append(ChannelNumber(value: 0x4004))
            try w.append(XORPeerAddress(address: remoteB))
        }
        try loop1.request(.channelBind, from: RelayFixture.clientB) { w throws(StunEncodeError) in
            try w.append(ChannelNumber(value: 0x4005))
            try w.append(XORPeerAddress(address: localA))
        }
    }

    /// Checks once, outside timing, that A's ChannelData leaves loop 0 with nothing queued and
    /// reaches B's TCP connection from loop 1 as padded ChannelData on B's channel 0x4005.
    func validate() throws {
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
        guard let batch = inbox.take() else { return 0 }
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
func relayHandOff(_ f: HandOffFixture, iterations: Int) -> UInt64 {
    let origin = f.loop0.origin(RelayFixture.clientA)
    var sum: UInt64 = 0
    for _ in 0..<iterations {
        f.loop0.core.handleClientPacket(opaque(f.toRemoteB), from: origin, now: f.loop0.now)
        sum &+= UInt64(f.handOnce())
        f.loop1.core.outbox.reset()
    }
    return sum
}
