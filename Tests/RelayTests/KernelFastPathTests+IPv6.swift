import CRelayFastPath
@testable import FastPath
import Glibc
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport
@testable import Relay

/// The kernel fast path's program on IPv6 (RFC 6156) over crafted packets (BPF_PROG_TEST_RUN):
/// both directions byte for byte with the mandatory UDP checksum (RFC 8200 §8.1), and what it
/// leaves to the stack.
@Suite(.serialized, .enabled(if: getuid() == 0, "loading BPF programs needs root"))
struct KernelFastPathIPv6Tests {
    static let client = TransportAddress.literal("[::1]:40001")
    static let server = TransportAddress.literal("[::1]:3478")
    static let relayed = TransportAddress.literal("[::1]:50001")
    static let peer = TransportAddress.literal("[::1]:6000")

    static func route(expiry: Int64 = EventLoop.now() + 60) -> ChannelRoute {
        ChannelRoute(
            client: client, server: server, clientSocket: ClientSocket(descriptor: 3), number: 0x4001, peer: peer,
            relayed: relayed, relaySocket: RelaySocket(descriptor: 9), expiry: expiry)
    }

    @Test(
        "ChannelData from the client leaves as UDP from the relayed address to the peer, checksum right",
        arguments: [1, 2, 3, 100, 255, 256, 257, 1200, 1448])
    func clientToPeer(size: Int) throws {
        let fastPath = try KernelFastPathTests.load()
        #expect(fastPath.install(Self.route()))
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let input = TestPacket.udp(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, payload))
        let (verdict, output) = try KernelFastPathTests.run(fastPath, input)
        #expect(verdict == 0)
        let parsed = try #require(TestPacket.parse(output))
        #expect(parsed.source == Self.relayed)
        #expect(parsed.destination == Self.peer)
        #expect(parsed.payload == payload)
        #expect(parsed.udpChecksumValid)
        #expect(fastPath.counters(of: Self.route()) == .init(packetsToPeer: 1, bytesToPeer: UInt64(size)))
    }

    @Test(
        "UDP from the peer reaches the client as ChannelData on its channel, checksum right",
        arguments: [1, 2, 3, 100, 251, 252, 1200, 1448])
    func peerToClient(size: Int) throws {
        let fastPath = try KernelFastPathTests.load()
        #expect(fastPath.install(Self.route()))
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 2) }
        let input = TestPacket.udp(from: Self.peer, to: Self.relayed, payload: payload)
        let (verdict, output) = try KernelFastPathTests.run(fastPath, input)
        #expect(verdict == 0)
        let parsed = try #require(TestPacket.parse(output))
        #expect(parsed.source == Self.server)
        #expect(parsed.destination == Self.client)
        #expect(parsed.payload == TestPacket.channelData(0x4001, payload))
        #expect(parsed.udpChecksumValid)
        #expect(fastPath.counters(of: Self.route()) == .init(packetsToClient: 1, bytesToClient: UInt64(size)))
    }

    @Test("Extension headers, over-long packets, expired entries and padded ChannelData go to the stack unchanged")
    func everythingElsePasses() throws {
        let fastPath = try KernelFastPathTests.load()
        #expect(fastPath.install(Self.route()))
        var padded = TestPacket.channelData(0x4001, [1, 2, 3])
        padded.append(0)
        let cases: [[UInt8]] = [
            // A fragment header (44) in front of the UDP header.
            TestPacket.ipv6UDP(
                from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, [1, 2, 3, 4]), nextHeader: 44),
            TestPacket.udp(from: Self.client, to: Self.server, payload: padded),
            // 1,449 bytes from the peer would be 1,504 with the ChannelData header: over the MTU.
            TestPacket.udp(from: Self.peer, to: Self.relayed, payload: [UInt8](repeating: 5, count: 1449)),
            TestPacket.udp(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4002, [1, 2])),
        ]
        for packet in cases {
            let (verdict, output) = try KernelFastPathTests.run(fastPath, packet)
            #expect(verdict == KernelFastPathTests.pass)
            #expect(output == packet)
        }
        #expect(fastPath.statistics()[Int(RELAYD_STAT_PASS_LENGTH.rawValue)] == 2)
        #expect(fastPath.counters(of: Self.route()) == .init())
        let expired = Self.route(expiry: EventLoop.now())
        #expect(fastPath.install(expired))
        let fromPeer = TestPacket.udp(from: Self.peer, to: Self.relayed, payload: [1, 2, 3])
        #expect(try KernelFastPathTests.run(fastPath, fromPeer).packet == fromPeer)
        #expect(fastPath.statistics()[Int(RELAYD_STAT_PASS_EXPIRED.rawValue)] == 1)
    }
}
