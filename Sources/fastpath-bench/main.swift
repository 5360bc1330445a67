// fastpath-bench: what relayd's kernel fast path programs (TC and XDP) cost per packet, measured in the
// running kernel with BPF_PROG_TEST_RUN (docs/kernel-fast-path.md). Needs root and the object
// built by scripts/build-bpf.sh.
//
//   fastpath-bench [--object PATH] [--runs N] [--repeat N]
//
// Two figures per case:
// - single: the median over --runs runs of one pass each (the kernel's own timing of one run,
//   which includes the test harness's fixed cost, about 100 ns);
// - repeat: the kernel's mean over --repeat passes in one call. A test run feeds each pass the
//   packet the previous one left, so the routes form a cycle of relay-to-relay pairs that turns
//   A's ChannelData into B's and back: each pass is a full relay-to-relay rewrite. (A cycle
//   through client -> peer is not possible: the program would take it as relay to relay.)
import CRelayFastPath
import FastPath
import Glibc
import RelayCore
import StunCodec

var objectPath = ".build/bpf/relayd_fastpath.bpf.o"
var runs = 2000
var repeatCount: UInt32 = 100_000
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--object": objectPath = arguments.next() ?? objectPath
    case "--runs": runs = Int(arguments.next() ?? "") ?? runs
    case "--repeat": repeatCount = UInt32(arguments.next() ?? "") ?? repeatCount
    default:
        print("usage: fastpath-bench [--object PATH] [--runs N] [--repeat N]")
        exit(2)
    }
}

func address(_ ip: String, _ port: UInt16) -> TransportAddress { TransportAddress(ip: IPAddress(ip)!, port: port) }

let client = address("127.0.0.10", 40001)
let server = address("127.0.0.1", 3478)
let relayed = address("127.0.0.1", 50001)
let peer = address("127.0.0.5", 6000)
let expiry = Int64(clock_gettime_nsec_np_boot() / 1_000_000_000) + 600

func clock_gettime_nsec_np_boot() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_BOOTTIME, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func route(client: TransportAddress, server: TransportAddress, channel: UInt16, peer: TransportAddress,
           relayed: TransportAddress, socket: Int32) -> ChannelRoute {
    ChannelRoute(
        client: client, server: server, clientSocket: ClientSocket(descriptor: 3), number: channel, peer: peer,
        relayed: relayed, relaySocket: RelaySocket(descriptor: socket), expiry: expiry)
}

/// One BPF_PROG_TEST_RUN call: the kernel's mean nanoseconds per pass, and the verdict.
func testRun(_ fastPath: KernelFastPath, _ program: Int32, _ packet: [UInt8], repeat count: UInt32) -> (ns: UInt32, verdict: UInt32) {
    do {
        let result = try fastPath.testRun(program, packet, repeat: count)
        return (result.nanoseconds, result.verdict)
    } catch {
        print("BPF_PROG_TEST_RUN failed: \(error.description)")
        exit(1)
    }
}

func median(_ fastPath: KernelFastPath, _ program: Int32, _ packet: [UInt8], runs: Int) -> UInt32 {
    let samples = (0..<runs).map { _ in testRun(fastPath, program, packet, repeat: 1).ns }.sorted()
    return samples[samples.count / 2]
}

func load(_ objectPath: String, egress: [IPAddress: UInt32] = [:]) -> KernelFastPath {
    do {
        return try KernelFastPath(objectPath: objectPath, localAddresses: [], egressInterfaces: egress)
    } catch {
        print("fastpath-bench: \(error.description)")
        exit(1)
    }
}

// One program for the single-pass figures: a client's channel to a peer, and a relay-to-relay
// pair (A's channel 0x4002 to B's relayed address, B's channel 0x4003 back to A's).
let single = load(objectPath)
let clientB = address("127.0.0.20", 40002)
let relayedA = address("127.0.0.1", 50003)
let relayedB = address("127.0.0.1", 50002)
_ = single.install(route(client: client, server: server, channel: 0x4001, peer: peer, relayed: relayed, socket: 9))
_ = single.install(route(client: client, server: server, channel: 0x4002, peer: relayedB, relayed: relayedA, socket: 11))
_ = single.install(route(client: clientB, server: server, channel: 0x4003, peer: relayedA, relayed: relayedB, socket: 12))

// Another for the repeat figure, whose routes form a cycle: A -> B as above, then a second pair
// that takes B's ChannelData (server -> B's client, channel 0x4003) back to A's original one.
let cycle = load(objectPath)
let relayedX = address("127.0.0.1", 50004)
let relayedY = address("127.0.0.1", 50005)
_ = cycle.install(route(client: client, server: server, channel: 0x4002, peer: relayedB, relayed: relayedA, socket: 11))
_ = cycle.install(route(client: clientB, server: server, channel: 0x4003, peer: relayedA, relayed: relayedB, socket: 12))
_ = cycle.install(route(client: server, server: clientB, channel: 0x4003, peer: relayedY, relayed: relayedX, socket: 13))
_ = cycle.install(route(client: server, server: client, channel: 0x4002, peer: relayedX, relayed: relayedY, socket: 14))

print("relayd fast path program, BPF_PROG_TEST_RUN, ns per packet (single: median of \(runs) one-pass runs; repeat: mean of \(repeatCount) passes)")
for size in [100, 1200] {
    let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
    let toPeer = Frames.udp(from: client, to: server, payload: Frames.channelData(0x4001, payload))
    let fromPeer = Frames.udp(from: peer, to: relayed, payload: payload)
    let relayToRelay = Frames.udp(from: client, to: server, payload: Frames.channelData(0x4002, payload))
    let unknown = Frames.udp(from: address("127.0.0.99", 1), to: server, payload: Frames.channelData(0x4001, payload))
    let p = single.programDescriptor
    print(
        "\(size) B: client->peer single \(median(single, p, toPeer, runs: runs)), peer->client single \(median(single, p, fromPeer, runs: runs)), "
            + "relay-to-relay single \(median(single, p, relayToRelay, runs: runs)), no entry single \(median(single, p, unknown, runs: runs)); "
            + "relay-to-relay repeat \(testRun(cycle, cycle.programDescriptor, relayToRelay, repeat: repeatCount).ns), "
            + "no entry repeat \(testRun(single, p, unknown, repeat: repeatCount).ns)")
}
// The XDP program, for destinations on another host whose link-layer addresses are known.
let xdpServer = address("10.255.0.1", 3478)
let xdp = load(objectPath, egress: [xdpServer.ip: 1])
xdp.linkLayer = { _, _ in KernelFastPath.LinkLayer(nextHop: [2, 0, 0, 0, 0, 1], egress: [2, 0, 0, 0, 0, 2]) }
let remoteClient = address("198.51.100.10", 40001)
let remotePeer = address("203.0.113.5", 6000)
let xdpRelayed = address("10.255.0.1", 50001)
_ = xdp.install(
    route(client: remoteClient, server: xdpServer, channel: 0x4001, peer: remotePeer, relayed: xdpRelayed, socket: 9))
for size in [100, 1200] {
    let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
    let toPeer = Frames.udp(from: remoteClient, to: xdpServer, payload: Frames.channelData(0x4001, payload))
    let fromPeer = Frames.udp(from: remotePeer, to: xdpRelayed, payload: payload)
    let p = xdp.xdpProgramDescriptor
    print(
        "\(size) B, XDP: client->peer single \(median(xdp, p, toPeer, runs: runs)), "
            + "peer->client single \(median(xdp, p, fromPeer, runs: runs))")
}

let counts = single.statistics()
let cycled = cycle.statistics()
let viaXDP = xdp.statistics()
print(
    "program counters: single to peer \(counts[0]), to client \(counts[1]), relay to relay \(counts[6]); "
        + "cycle relay to relay \(cycled[6]); XDP relayed \(viaXDP[7])")
