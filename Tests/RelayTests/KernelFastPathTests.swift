import CRelayFastPath
@testable import FastPath
import Glibc
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport
@testable import Relay

/// The kernel fast path's BPF program, loaded into the running kernel and run over crafted
/// packets with BPF_PROG_TEST_RUN: what it leaves is checked byte for byte, checksums included
/// (docs/kernel-fast-path.md). Needs root (CAP_BPF) and the object from scripts/build-bpf.sh.
@Suite(.serialized, .enabled(if: getuid() == 0, "loading BPF programs needs root"))
struct KernelFastPathTests {
    static let objectPath: String = {
        var root = "\(#filePath)"
        for _ in 0..<3 { root = String(root[..<(root.lastIndex(of: "/") ?? root.startIndex)]) }
        return root + "/.build/bpf/relayd_fastpath.bpf.o"
    }()

    // Loopback addresses: the program rewrites only towards destinations the kernel delivers
    // locally (remote ones stay relayd's for now, `remotePeerPasses`).
    static let client = TransportAddress.literal("127.0.0.10:40001")
    static let server = TransportAddress.literal("127.0.0.1:3478")
    static let relayed = TransportAddress.literal("127.0.0.1:50001")
    static let peer = TransportAddress.literal("127.0.0.5:6000")

    /// The verdict of a packet the program leaves alone: TC_ACT_UNSPEC (-1), so the next program
    /// on the hook still sees it.
    static let pass = UInt32(bitPattern: -1)

    static func route(channel: UInt16 = 0x4001, expiry: Int64 = EventLoop.now() + 60) -> ChannelRoute {
        ChannelRoute(
            client: client, server: server, clientSocket: ClientSocket(descriptor: 3), number: channel, peer: peer,
            relayed: relayed, relaySocket: RelaySocket(descriptor: 9), expiry: expiry)
    }

    static func load() throws -> KernelFastPath {
        guard access(objectPath, R_OK) == 0 else {
            throw KernelFastPath.Failure(description: "\(objectPath) is missing: run scripts/build-bpf.sh")
        }
        return try KernelFastPath(objectPath: objectPath, localAddresses: [])
    }

    /// `frame` with its IPv4 flags and fragment offset (in 8-byte units) replaced.
    static func fragment(_ frame: [UInt8], flags: UInt8, offset: UInt16) -> [UInt8] {
        var frame = frame
        frame[20] = flags | UInt8(offset >> 8)
        frame[21] = UInt8(offset & 0xFF)
        return frame
    }

    /// Runs the TC program once over `packet`: its verdict and the packet it leaves.
    static func run(_ fastPath: KernelFastPath, _ packet: [UInt8]) throws -> (verdict: UInt32, packet: [UInt8]) {
        let result = try fastPath.testRun(fastPath.programDescriptor, packet)
        return (result.verdict, result.packet)
    }

    @Test(
        "ChannelData from the client leaves as UDP from the relayed address to the peer, checksums right",
        arguments: [1, 2, 3, 4, 5, 63, 100, 251, 255, 256, 257, 1023, 1200, 1468])
    func clientToPeer(size: Int) throws {
        let fastPath = try Self.load()
        #expect(fastPath.install(Self.route()))
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        let input = TestPacket.ipv4UDP(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, payload))
        let (verdict, output) = try Self.run(fastPath, input)
        #expect(verdict == 0)  // TC_ACT_OK
        let parsed = try #require(TestPacket.parse(output))
        #expect(parsed.source == Self.relayed)
        #expect(parsed.destination == Self.peer)
        #expect(parsed.payload == payload)
        #expect(parsed.ipChecksumValid)
        #expect(parsed.udpChecksumValid)
        #expect(fastPath.counters(of: Self.route()) == .init(packetsToPeer: 1, bytesToPeer: UInt64(size)))
    }

    @Test(
        "UDP from the peer reaches the client as ChannelData on its channel, checksums right",
        arguments: [1, 2, 3, 4, 63, 100, 247, 251, 252, 253, 1200, 1468])
    func peerToClient(size: Int) throws {
        let fastPath = try Self.load()
        #expect(fastPath.install(Self.route()))
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        let input = TestPacket.ipv4UDP(from: Self.peer, to: Self.relayed, payload: payload)
        let (verdict, output) = try Self.run(fastPath, input)
        #expect(verdict == 0)
        let parsed = try #require(TestPacket.parse(output))
        #expect(parsed.source == Self.server)
        #expect(parsed.destination == Self.client)
        #expect(parsed.payload == TestPacket.channelData(0x4001, payload))
        #expect(parsed.ipChecksumValid)
        #expect(parsed.udpChecksumValid)
        #expect(fastPath.counters(of: Self.route()) == .init(packetsToClient: 1, bytesToClient: UInt64(size)))
    }

    @Test("Past its expiry an entry relays nothing: the packet goes to the stack unchanged and is counted")
    func expiredEntryPasses() throws {
        let fastPath = try Self.load()
        let expired = Self.route(expiry: EventLoop.now())
        #expect(fastPath.install(expired))
        let toPeer = TestPacket.ipv4UDP(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, [1, 2, 3, 4]))
        let fromPeer = TestPacket.ipv4UDP(from: Self.peer, to: Self.relayed, payload: [9, 9, 9])
        #expect(try Self.run(fastPath, toPeer).packet == toPeer)
        #expect(try Self.run(fastPath, fromPeer).packet == fromPeer)
        #expect(fastPath.statistics()[Int(RELAYD_STAT_PASS_EXPIRED.rawValue)] == 2)
        #expect(fastPath.counters(of: expired) == .init())
    }

    @Test("Padded, truncated, short, fragmented or unknown-channel ChannelData, STUN and other ports go to the stack unchanged")
    func everythingElsePasses() throws {
        let fastPath = try Self.load()
        #expect(fastPath.install(Self.route()))
        var padded = TestPacket.channelData(0x4001, [1, 2, 3])
        padded.append(0)
        var long = TestPacket.channelData(0x4001, [1, 2, 3, 4])
        long[3] = 9  // says 9 bytes, carries 4
        let stun: [UInt8] = [0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xA4, 0x42] + [UInt8](repeating: 7, count: 12)
        let cases: [[UInt8]] = [
            TestPacket.ipv4UDP(from: Self.client, to: Self.server, payload: padded),
            TestPacket.ipv4UDP(from: Self.client, to: Self.server, payload: long),
            TestPacket.ipv4UDP(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4002, [1, 2])),
            TestPacket.ipv4UDP(from: Self.client, to: Self.server, payload: stun),
            TestPacket.ipv4UDP(from: Self.peer, to: TransportAddress.literal("127.0.0.1:50002"), payload: [1, 2, 3, 4]),
            TestPacket.ipv4UDP(from: TransportAddress.literal("127.0.0.5:6001"), to: Self.relayed, payload: [1, 2, 3, 4]),
            // Shorter than a ChannelData header, on a bound 5-tuple.
            TestPacket.ipv4UDP(from: Self.client, to: Self.server, payload: [0x40, 0x01]),
            // A first fragment (more fragments follow) of a ChannelData datagram, and a later one.
            Self.fragment(
                TestPacket.ipv4UDP(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, [1, 2, 3, 4])),
                flags: 0x20, offset: 0),
            Self.fragment(
                TestPacket.ipv4UDP(from: Self.peer, to: Self.relayed, payload: [1, 2, 3, 4]), flags: 0x00, offset: 185),
        ]
        for packet in cases {
            let (verdict, output) = try Self.run(fastPath, packet)
            #expect(verdict == Self.pass)
            #expect(output == packet)
        }
        #expect(fastPath.statistics()[Int(RELAYD_STAT_PASS_LENGTH.rawValue)] == 2)
        #expect(fastPath.counters(of: Self.route()) == .init())
    }

    @Test("A refresh keeps the counters; removal returns them and stops relaying")
    func refreshAndRemoval() throws {
        let fastPath = try Self.load()
        #expect(fastPath.install(Self.route()))
        let toPeer = TestPacket.ipv4UDP(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, [1, 2, 3, 4, 5]))
        let fromPeer = TestPacket.ipv4UDP(from: Self.peer, to: Self.relayed, payload: [1, 2, 3])
        for _ in 0..<3 { _ = try Self.run(fastPath, toPeer) }
        #expect(fastPath.install(Self.route(expiry: EventLoop.now() + 600)))
        for _ in 0..<2 { _ = try Self.run(fastPath, fromPeer) }
        let counters = fastPath.remove(Self.route())
        #expect(counters == .init(packetsToPeer: 3, bytesToPeer: 15, packetsToClient: 2, bytesToClient: 6))
        #expect(try Self.run(fastPath, toPeer).packet == toPeer)
        #expect(fastPath.counters(of: Self.route()) == .init())
    }

    @Test("Towards another host with no known egress interface the packet stays relayd's: unchanged, counted")
    func remotePeerPasses() throws {
        let fastPath = try Self.load()
        var route = Self.route()
        route.peer = TransportAddress.literal("203.0.113.5:6000")
        #expect(fastPath.install(route))
        let toPeer = TestPacket.ipv4UDP(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, [1, 2, 3, 4]))
        #expect(try Self.run(fastPath, toPeer).packet == toPeer)
        #expect(fastPath.statistics()[Int(RELAYD_STAT_PASS_UNSUPPORTED.rawValue)] == 1)
        #expect(fastPath.counters(of: route) == .init())
    }

    @Test("Towards another host the rewritten packet is redirected out of the interface carrying its source")
    func remotePeerRedirected() throws {
        let fastPath = try KernelFastPath(
            objectPath: Self.objectPath, localAddresses: [], egressInterfaces: [Self.relayed.ip: 1])
        var route = Self.route()
        route.peer = TransportAddress.literal("203.0.113.5:6000")
        #expect(fastPath.install(route))
        let payload: [UInt8] = [1, 2, 3, 4, 5, 6]
        let toPeer = TestPacket.ipv4UDP(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, payload))
        let (verdict, output) = try Self.run(fastPath, toPeer)
        #expect(verdict == 7)  // TC_ACT_REDIRECT
        let parsed = try #require(TestPacket.parse(output))
        #expect(parsed.destination == route.peer)
        #expect(parsed.source == Self.relayed)
        #expect(parsed.payload == payload)
        #expect(parsed.udpChecksumValid && parsed.ipChecksumValid)
        #expect(fastPath.counters(of: route) == .init(packetsToPeer: 1, bytesToPeer: 6))
    }

    @Test("A route that changes address family is not offloaded: its packets keep the user-space path")
    func familyChangeNotOffloaded() throws {
        let fastPath = try Self.load()
        var route = Self.route()
        route.peer = TransportAddress.literal("[2001:db8::5]:6000")
        route.relayed = TransportAddress.literal("[::1]:50001")
        #expect(!fastPath.install(route))
    }
}
