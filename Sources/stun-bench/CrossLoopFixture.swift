import Relay
import RelayCore
import StunCodec

/// Two loop threads' cores sharing a relayed-address directory: client A on loop 0 bound by
/// channel 0x4004 to the relayed address of client B on loop 1, which bound 0x4005 back. With a
/// UDP client B, A's ChannelData is framed by loop 0 for B's client and queued on loop 0's
/// listener (the relay-to-relay short-circuit across threads); with a TCP client B it is framed
/// for B's stream by loop 0 and queued on B's connection (`CrossLoopFixture+Stream.swift`).
final class CrossLoopFixture {
    let loop0: RelayFixture
    let loop1: RelayFixture
    /// B's connection (with a TCP client B).
    let sink: BenchStreamSink?
    /// ChannelData on 0x4004, 100 bytes, from A on loop 0.
    let toRemoteB: UnsafeRawBufferPointer

    init(transportB: TransportProtocol = .udp) throws {
        let directory = RelayedAddressDirectory()
        let ledger = LocalAdmissionLedger()
        let ports = RelayFixture.portPool()
        loop0 = try RelayFixture(loop: 0, of: 2, directory: directory, ledger: ledger, ports: ports)
        loop1 = try RelayFixture(
            loop: 1, of: 2, directory: directory, ledger: ledger, transportB: transportB, ports: ports)
        sink = transportB.isStream ? BenchStreamSink() : nil
        sink?.install(owner: loop1.core, origin: loop1.origin(RelayFixture.clientB))
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

    /// Checks once, outside timing, that A's ChannelData leaves loop 0's listener (socket 3) for
    /// B's client as ChannelData on B's channel 0x4005, with nothing sent to a relay socket.
    func validate() throws {
        let core = loop0.core
        core.handleClientPacket(toRemoteB, from: loop0.origin(RelayFixture.clientA), now: loop0.now)
        defer { core.outbox.reset() }
        let expected = ClientOrigin(
            fiveTuple: FiveTuple(client: RelayFixture.clientB, server: RelayFixture.server, transport: .udp),
            socket: ClientSocket(descriptor: 3))
        guard core.outbox.packets.count == 1, core.outbox.packets[0].route == .client(expected),
            core.outbox.packets[0].bytes.count == 104, core.outbox.packets[0].bytes[1] == 0x05
        else { throw BenchError.invalidFixture("cross-loop short-circuit") }
    }
}

/// (h) Client A's ChannelData to the relayed address of client B on another loop: looked up in
/// the shared directory and delivered to B as ChannelData from loop 0's listener.
@inline(never)
func relayCrossLoop(_ f: CrossLoopFixture, iterations: Int) -> UInt64 {
    relayClientPackets(f.toRemoteB, on: f.loop0, iterations: iterations)
}
