import CRelayFastPath
@testable import FastPath
import Glibc
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport
@testable import Relay

/// The XDP side of the kernel fast path over crafted frames (BPF_PROG_TEST_RUN): it rewrites
/// and redirects what it can finish itself (IPv4, a destination on another host, link-layer
/// addresses known), headers, link-layer addresses and checksums checked byte for byte; it
/// passes everything else unchanged to the TC program.
@Suite(.serialized, .enabled(if: getuid() == 0, "loading BPF programs needs root"))
struct KernelFastPathXDPTests {
    static let xdpPass: UInt32 = 2
    static let xdpRedirect: UInt32 = 4
    static let nextHop: [UInt8] = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55]
    static let egress: [UInt8] = [0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE]

    static let client = TransportAddress.literal("198.51.100.10:40001")
    static let server = TransportAddress.literal("127.0.0.1:3478")
    static let relayed = TransportAddress.literal("127.0.0.1:50001")
    static let peer = TransportAddress.literal("203.0.113.5:6000")

    static func route(channel: UInt16 = 0x4001, expiry: Int64 = EventLoop.now() + 60) -> ChannelRoute {
        ChannelRoute(
            client: client, server: server, clientSocket: ClientSocket(descriptor: 3), number: channel, peer: peer,
            relayed: relayed, relaySocket: RelaySocket(descriptor: 9), expiry: expiry)
    }

    /// The program with every non-local destination leaving by interface 1, and link-layer
    /// addresses known unless `linkLayer` is false.
    static func load(linkLayer: Bool = true) throws -> KernelFastPath {
        let fastPath = try KernelFastPath(
            objectPath: KernelFastPathTests.objectPath, localAddresses: [], egressInterfaces: [server.ip: 1])
        if linkLayer {
            fastPath.linkLayer = { _, _ in KernelFastPath.LinkLayer(nextHop: nextHop, egress: egress) }
        }
        return fastPath
    }

    static func run(_ fastPath: KernelFastPath, _ frame: [UInt8]) throws -> (verdict: UInt32, frame: [UInt8]) {
        let result = try fastPath.testRun(fastPath.xdpProgramDescriptor, frame)
        return (result.verdict, result.packet)
    }

    @Test("ChannelData to a peer on another host leaves as UDP with its link-layer addresses",
          arguments: [1, 3, 100, 255, 256, 257, 1200, 1468])
    func clientToPeer(size: Int) throws {
        let fastPath = try Self.load()
        #expect(fastPath.install(Self.route()))
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 3 &+ 7) }
        let input = TestPacket.udp(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, payload))
        let (verdict, output) = try Self.run(fastPath, input)
        #expect(verdict == Self.xdpRedirect)
        #expect(Array(output[0..<6]) == Self.nextHop)
        #expect(Array(output[6..<12]) == Self.egress)
        let parsed = try #require(TestPacket.parse(output))
        #expect(parsed.source == Self.relayed)
        #expect(parsed.destination == Self.peer)
        #expect(parsed.payload == payload)
        #expect(parsed.ipChecksumValid && parsed.udpChecksumValid)
        #expect(fastPath.counters(of: Self.route()) == .init(packetsToPeer: 1, bytesToPeer: UInt64(size)))
    }

    @Test("UDP from a peer reaches a client on another host as ChannelData", arguments: [1, 3, 100, 252, 1200, 1468])
    func peerToClient(size: Int) throws {
        let fastPath = try Self.load()
        #expect(fastPath.install(Self.route()))
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 5 &+ 1) }
        let (verdict, output) = try Self.run(fastPath, TestPacket.udp(from: Self.peer, to: Self.relayed, payload: payload))
        #expect(verdict == Self.xdpRedirect)
        #expect(Array(output[0..<6]) == Self.nextHop)
        let parsed = try #require(TestPacket.parse(output))
        #expect(parsed.source == Self.server)
        #expect(parsed.destination == Self.client)
        #expect(parsed.payload == TestPacket.channelData(0x4001, payload))
        #expect(parsed.ipChecksumValid && parsed.udpChecksumValid)
        #expect(fastPath.counters(of: Self.route()) == .init(packetsToClient: 1, bytesToClient: UInt64(size)))
    }

    @Test("A peer's data that starts like ChannelData (first bits 01) still reaches the client by XDP")
    func peerDataLikeChannelData() throws {
        let fastPath = try Self.load()
        #expect(fastPath.install(Self.route()))
        let payload = Array("RLG1 looks like channel 0x524C".utf8) + [UInt8](repeating: 7, count: 70)
        let (verdict, output) = try Self.run(fastPath, TestPacket.udp(from: Self.peer, to: Self.relayed, payload: payload))
        #expect(verdict == Self.xdpRedirect)
        let parsed = try #require(TestPacket.parse(output))
        #expect(parsed.source == Self.server && parsed.destination == Self.client)
        #expect(parsed.payload == TestPacket.channelData(0x4001, payload))
        #expect(parsed.udpChecksumValid)
        #expect(fastPath.counters(of: Self.route()) == .init(packetsToClient: 1, bytesToClient: UInt64(payload.count)))
    }

    @Test("Relay to relay between two clients on other hosts, in one pass")
    func relayToRelay() throws {
        let fastPath = try Self.load()
        let relayedB = TransportAddress.literal("127.0.0.1:50002")
        let clientB = TransportAddress.literal("198.51.100.20:40002")
        let a = ChannelRoute(
            client: Self.client, server: Self.server, clientSocket: ClientSocket(descriptor: 3), number: 0x4001,
            peer: relayedB, relayed: Self.relayed, relaySocket: RelaySocket(descriptor: 9), expiry: EventLoop.now() + 60)
        let b = ChannelRoute(
            client: clientB, server: Self.server, clientSocket: ClientSocket(descriptor: 3), number: 0x4ABC,
            peer: Self.relayed, relayed: relayedB, relaySocket: RelaySocket(descriptor: 10), expiry: EventLoop.now() + 60)
        #expect(fastPath.install(a) && fastPath.install(b))
        let payload = [UInt8](repeating: 0x5A, count: 321)
        let input = TestPacket.udp(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, payload))
        let (verdict, output) = try Self.run(fastPath, input)
        #expect(verdict == Self.xdpRedirect)
        let parsed = try #require(TestPacket.parse(output))
        #expect(parsed.source == Self.server)
        #expect(parsed.destination == clientB)
        #expect(parsed.payload == TestPacket.channelData(0x4ABC, payload))
        #expect(parsed.ipChecksumValid && parsed.udpChecksumValid)
        #expect(fastPath.counters(of: b) == .init(packetsToClient: 1, bytesToClient: 321))
    }

    @Test("Without link-layer addresses, for local destinations, expired entries, IPv6 or padding: passed on unchanged")
    func everythingElsePasses() throws {
        let unknownLinkLayer = try Self.load(linkLayer: false)
        #expect(unknownLinkLayer.install(Self.route()))
        let toPeer = TestPacket.udp(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, [1, 2, 3, 4]))
        #expect(try Self.run(unknownLinkLayer, toPeer) == (Self.xdpPass, toPeer))

        let fastPath = try Self.load()
        var local = Self.route(channel: 0x4002)
        local.peer = TransportAddress.literal("127.0.0.5:6000")
        #expect(fastPath.install(local))
        #expect(fastPath.install(Self.route(channel: 0x4003, expiry: EventLoop.now())))
        var padded = TestPacket.channelData(0x4001, [1, 2, 3])
        padded.append(0)
        #expect(fastPath.install(Self.route()))
        let cases: [[UInt8]] = [
            TestPacket.udp(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4002, [1, 2])),
            TestPacket.udp(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4003, [1, 2])),
            TestPacket.udp(from: Self.client, to: Self.server, payload: padded),
            TestPacket.udp(
                from: TransportAddress.literal("[::1]:40001"), to: TransportAddress.literal("[::1]:3478"),
                payload: TestPacket.channelData(0x4001, [1, 2])),
        ]
        for frame in cases {
            let (verdict, output) = try Self.run(fastPath, frame)
            #expect(verdict == Self.xdpPass)
            #expect(output == frame)
        }
        // Passes are the TC program's to count.
        #expect(fastPath.statistics() == [UInt64](repeating: 0, count: Int(RELAYD_STAT_COUNT.rawValue)))
    }
}

/// The XDP program on IPv6 (RFC 6156; RFC 8200 §8.1 for the UDP checksum).
@Suite(.serialized, .enabled(if: getuid() == 0, "loading BPF programs needs root"))
struct KernelFastPathXDPIPv6Tests {
    static let client = TransportAddress.literal("[2001:db8:1::10]:40001")
    static let server = TransportAddress.literal("[2001:db8:2::1]:3478")
    static let relayed = TransportAddress.literal("[2001:db8:2::1]:50001")
    static let peer = TransportAddress.literal("[2001:db8:3::5]:6000")

    static func load() throws -> KernelFastPath {
        let fastPath = try KernelFastPath(
            objectPath: KernelFastPathTests.objectPath, localAddresses: [], egressInterfaces: [server.ip: 1])
        fastPath.linkLayer = { _, _ in
            KernelFastPath.LinkLayer(nextHop: KernelFastPathXDPTests.nextHop, egress: KernelFastPathXDPTests.egress)
        }
        return fastPath
    }

    static let route = ChannelRoute(
        client: client, server: server, clientSocket: ClientSocket(descriptor: 3), number: 0x4001, peer: peer,
        relayed: relayed, relaySocket: RelaySocket(descriptor: 9), expiry: EventLoop.now() + 60)

    @Test("Both directions over IPv6: link-layer addresses, addresses, payloads and checksums", arguments: [1, 3, 100, 257, 1200, 1448])
    func bothDirections(size: Int) throws {
        let fastPath = try Self.load()
        #expect(fastPath.install(Self.route))
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 9 &+ 4) }
        let toPeer = TestPacket.udp(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, payload))
        let (verdict, output) = try KernelFastPathXDPTests.run(fastPath, toPeer)
        #expect(verdict == KernelFastPathXDPTests.xdpRedirect)
        #expect(Array(output[0..<6]) == KernelFastPathXDPTests.nextHop)
        let parsed = try #require(TestPacket.parse(output))
        #expect(parsed.source == Self.relayed && parsed.destination == Self.peer)
        #expect(parsed.payload == payload)
        #expect(parsed.udpChecksumValid)
        // The peer's answer starts with 0x4F..., as ChannelData would: it is still the peer's data.
        let fromPeer = TestPacket.udp(from: Self.peer, to: Self.relayed, payload: [0x4F] + payload.dropFirst())
        let (back, frame) = try KernelFastPathXDPTests.run(fastPath, fromPeer)
        #expect(back == KernelFastPathXDPTests.xdpRedirect)
        let answer = try #require(TestPacket.parse(frame))
        #expect(answer.source == Self.server && answer.destination == Self.client)
        #expect(answer.payload == TestPacket.channelData(0x4001, [0x4F] + payload.dropFirst()))
        #expect(answer.udpChecksumValid)
        #expect(
            fastPath.counters(of: Self.route)
                == .init(packetsToPeer: 1, bytesToPeer: UInt64(size), packetsToClient: 1, bytesToClient: UInt64(size)))
    }
}
