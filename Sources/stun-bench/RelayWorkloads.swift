import Relay
import RelayCore
import StunCodec

/// (d) A client's ChannelData to a public peer: demultiplex, find the allocation by 5-tuple,
/// the channel and permission, queue the payload for the relay socket (RFC 8656 §12.6).
@inline(never)
func relayClientToPeer(_ f: RelayFixture, iterations: Int) -> UInt64 {
    relayClientPackets(f.toPeer, on: f, iterations: iterations)
}

/// Hands `frame` from client A to `f`'s core `iterations` times, resetting the outbox each time;
/// returns the packets queued (so the work cannot be optimized away).
@inline(__always)
func relayClientPackets(_ frame: UnsafeRawBufferPointer, on f: RelayFixture, iterations: Int) -> UInt64 {
    let origin = f.origin(RelayFixture.clientA)
    var sum: UInt64 = 0
    for _ in 0..<iterations {
        f.core.handleClientPacket(opaque(frame), from: origin, now: f.now)
        sum &+= UInt64(f.core.outbox.packets.count)
        f.core.outbox.reset()
    }
    return sum
}

/// (e) A peer's datagram to a client with a channel: ChannelData header written in place in
/// front of the payload (RFC 8656 §12.7).
@inline(never)
func relayPeerToClientChannel(_ f: RelayFixture, iterations: Int) -> UInt64 {
    relayPeer(f, from: RelayFixture.channelPeer, iterations: iterations)
}

/// (f) A peer's datagram to a client without a channel: a Data indication written in place
/// (RFC 8656 §11.3).
@inline(never)
func relayPeerToClientIndication(_ f: RelayFixture, iterations: Int) -> UInt64 {
    relayPeer(f, from: RelayFixture.indicationPeer, iterations: iterations)
}

@inline(__always)
func relayPeer(_ f: RelayFixture, from peer: TransportAddress, iterations: Int) -> UInt64 {
    var sum: UInt64 = 0
    let buffer = opaque(f.peerBuffer)
    for _ in 0..<iterations {
        f.core.handlePeerPacket(relaySocket: f.socketA, from: peer, buffer: buffer, payload: f.payloadRange, now: f.now)
        sum &+= UInt64(f.core.outbox.packets.count)
        f.core.outbox.reset()
    }
    return sum
}

/// (g) Client A's ChannelData to client B's relayed address on the same core: delivered to B
/// as ChannelData without a socket (relay-to-relay short-circuit).
@inline(never)
func relayShortCircuit(_ f: RelayFixture, iterations: Int) -> UInt64 {
    relayClientPackets(f.toB, on: f, iterations: iterations)
}

extension RelayFixture {
    /// Checks once, outside timing, that each workload relays exactly one packet where it should.
    func validate() throws {
        func one(_ name: String, _ run: () -> Void, _ check: (OutboundPacket) -> Bool) throws {
            run()
            defer { core.outbox.reset() }
            guard core.outbox.packets.count == 1, check(core.outbox.packets[0]) else {
                throw BenchError.invalidFixture(name)
            }
        }
        let origin = origin(RelayFixture.clientA)
        try one("client to peer", { core.handleClientPacket(toPeer, from: origin, now: now) }) {
            $0.route == .peer(relaySocket: socketA, peer: RelayFixture.channelPeer) && $0.bytes.count == 100
        }
        try one("peer to client (channel)", {
            core.handlePeerPacket(relaySocket: socketA, from: RelayFixture.channelPeer, buffer: peerBuffer, payload: payloadRange, now: now)
        }) { $0.route == .client(origin) && $0.bytes.count == 104 && $0.bytes[0] == 0x40 && $0.bytes[1] == 0x01 }
        try one("peer to client (indication)", {
            core.handlePeerPacket(relaySocket: socketA, from: RelayFixture.indicationPeer, buffer: peerBuffer, payload: payloadRange, now: now)
        }) { $0.route == .client(origin) && $0.bytes.count == 20 + 12 + 104 }
        try one("short-circuit", { core.handleClientPacket(toB, from: origin, now: now) }) {
            $0.route == .client(self.origin(RelayFixture.clientB)) && $0.bytes.count == 104 && $0.bytes[1] == 0x03
        }
    }
}
