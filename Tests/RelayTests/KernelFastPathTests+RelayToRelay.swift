import CRelayFastPath
@testable import FastPath
import Glibc
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport
@testable import Relay

/// Relay to relay in one pass: ChannelData from client A on a channel to B's relayed address,
/// where B bound a channel to A's relayed address, reaches B as ChannelData on B's channel
/// without a second trip through the stack (BPF_PROG_TEST_RUN, both families).
@Suite(.serialized, .enabled(if: getuid() == 0, "loading BPF programs needs root"))
struct KernelFastPathRelayToRelayTests {
    struct Pair {
        var a: ChannelRoute
        var b: ChannelRoute
    }

    /// A's channel 0x4001 to B's relayed address, and B's channel 0x4ABC to A's.
    static func pair(ipv6: Bool, expiryB: Int64 = EventLoop.now() + 60) -> Pair {
        func address(_ v4: String, _ port: UInt16) -> TransportAddress {
            TransportAddress.literal(ipv6 ? "[::1]:\(port)" : "\(v4):\(port)")
        }
        let server = address("127.0.0.1", 3478)
        let relayedA = address("127.0.0.1", 50001)
        let relayedB = address("127.0.0.1", 50002)
        let a = ChannelRoute(
            client: address("127.0.0.10", 40001), server: server, clientSocket: ClientSocket(descriptor: 3),
            number: 0x4001, peer: relayedB, relayed: relayedA, relaySocket: RelaySocket(descriptor: 9),
            expiry: EventLoop.now() + 60)
        let b = ChannelRoute(
            client: address("127.0.0.20", 40002), server: server, clientSocket: ClientSocket(descriptor: 3),
            number: 0x4ABC, peer: relayedA, relayed: relayedB, relaySocket: RelaySocket(descriptor: 10),
            expiry: expiryB)
        return Pair(a: a, b: b)
    }

    @Test("A's ChannelData reaches B as ChannelData on B's channel, counted for both", arguments: [false, true])
    func onePass(ipv6: Bool) throws {
        let fastPath = try KernelFastPathTests.load()
        let routes = Self.pair(ipv6: ipv6)
        #expect(fastPath.install(routes.a))
        #expect(fastPath.install(routes.b))
        for size in [1, 3, 100, 257, 1200] {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 5 &+ 9) }
            let input = TestPacket.udp(
                from: routes.a.client, to: routes.a.server, payload: TestPacket.channelData(0x4001, payload))
            let (verdict, output) = try KernelFastPathTests.run(fastPath, input)
            #expect(verdict == 0)
            let parsed = try #require(TestPacket.parse(output))
            #expect(parsed.source == routes.b.server)
            #expect(parsed.destination == routes.b.client)
            #expect(parsed.payload == TestPacket.channelData(0x4ABC, payload))
            #expect(parsed.ipChecksumValid && parsed.udpChecksumValid)
        }
        let bytes: UInt64 = 1 + 3 + 100 + 257 + 1200
        #expect(fastPath.counters(of: routes.a) == .init(packetsToPeer: 5, bytesToPeer: bytes))
        #expect(fastPath.counters(of: routes.b) == .init(packetsToClient: 5, bytesToClient: bytes))
        #expect(fastPath.statistics()[Int(RELAYD_STAT_RELAY_TO_RELAY.rawValue)] == 5)
    }

    @Test("When B's route has expired, A's packet goes to B's relayed address as plain UDP", arguments: [false, true])
    func expiredTargetTakesTheLongWay(ipv6: Bool) throws {
        let fastPath = try KernelFastPathTests.load()
        let routes = Self.pair(ipv6: ipv6, expiryB: EventLoop.now())
        #expect(fastPath.install(routes.a))
        #expect(fastPath.install(routes.b))
        let payload: [UInt8] = [7, 7, 7, 7, 7]
        let input = TestPacket.udp(from: routes.a.client, to: routes.a.server, payload: TestPacket.channelData(0x4001, payload))
        let parsed = try #require(TestPacket.parse(try KernelFastPathTests.run(fastPath, input).packet))
        #expect(parsed.source == routes.a.relayed)
        #expect(parsed.destination == routes.b.relayed)
        #expect(parsed.payload == payload)
        #expect(parsed.udpChecksumValid)
        #expect(fastPath.counters(of: routes.b) == .init())
        #expect(fastPath.statistics()[Int(RELAYD_STAT_RELAY_TO_RELAY.rawValue)] == 0)
    }

    @Test(
        "A route to a relayed address relays only into the other client's channel: without it, and from the stack, relayd judges",
        arguments: [false, true])
    func relayedPeerLeftToRelayd(ipv6: Bool) throws {
        let fastPath = try KernelFastPathTests.load()
        var routes = Self.pair(ipv6: ipv6, expiryB: EventLoop.now())
        routes.a.peerIsRelayed = true
        routes.b.peerIsRelayed = true
        #expect(fastPath.install(routes.a))
        #expect(fastPath.install(routes.b))
        // B's route has ended (its allocation may have): A's ChannelData goes to relayd unchanged,
        // which drops it unless an allocation holds B's port, never to whatever is bound there.
        let toB = TestPacket.udp(from: routes.a.client, to: routes.a.server, payload: TestPacket.channelData(0x4001, [7, 7]))
        #expect(try KernelFastPathTests.run(fastPath, toB).packet == toB)
        // A datagram from A's relayed address through the stack is relayd's to check too.
        let fromA = TestPacket.udp(from: routes.a.relayed, to: routes.b.relayed, payload: [1, 2, 3])
        let liveB = Self.pair(ipv6: ipv6).b
        #expect(fastPath.install(ChannelRoute(
            client: liveB.client, server: liveB.server, clientSocket: liveB.clientSocket, number: liveB.number,
            peer: liveB.peer, relayed: liveB.relayed, relaySocket: liveB.relaySocket, expiry: liveB.expiry,
            peerIsRelayed: true)))
        #expect(try KernelFastPathTests.run(fastPath, fromA).packet == fromA)
        #expect(fastPath.statistics()[Int(RELAYD_STAT_PASS_UNSUPPORTED.rawValue)] == 2)
        #expect(fastPath.counters(of: routes.a) == .init())
    }
}
