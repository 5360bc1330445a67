#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// stun-bench: time and heap allocations per operation of StunCodec's per-packet work and of
/// the relay core's data path (every relayed-packet path must not touch the heap).
///
///     stun-bench [ITERATIONS] [--assert-zero-alloc]
///
/// ITERATIONS (default 1,000,000) per run; each benchmark reports the median of 5 runs.
/// With --assert-zero-alloc it exits 1 when parsing a Binding request (a), ChannelData (b),
/// any relayed-packet path of the core (d-j) or relayd's TLS records (k) touch the heap. Build in release: scripts/bench-codec.sh.
let usage = "usage: stun-bench [ITERATIONS] [--assert-zero-alloc]"
var iterations = 1_000_000
var assertZeroAlloc = false
for argument in CommandLine.arguments.dropFirst() {
    if argument == "--assert-zero-alloc" {
        assertZeroAlloc = true
    } else if argument == "-h" || argument == "--help" {
        print(usage)
        exit(0)
    } else if let n = Int(argument), n > 0 {
        iterations = n
    } else {
        print(usage)
        exit(2)
    }
}

guard mallocCounterIsLive() else {
    print("stun-bench: malloc is not interposed by CMallocCounter; allocation counts would be meaningless")
    exit(1)
}

let fixture: Fixture
let relay: RelayFixture
let crossLoop: CrossLoopFixture
let toStream: CrossLoopFixture
let limited: RelayFixture
let tlsRecords: TLSRecordsFixture
do {
    fixture = try Fixture()
    try fixture.validate()
    relay = try RelayFixture()
    try relay.validate()
    crossLoop = try CrossLoopFixture()
    try crossLoop.validate()
    toStream = try CrossLoopFixture(transportB: .tcp)
    try toStream.validateStream()
    // The largest budget a second: all 5 runs of 1,000,000 packets (500 MB) fit in it, as the
    // fixture's clock stands still; the work measured is the budget check that passes.
    limited = try RelayFixture(maxBPS: Int(UInt32.max))
    try limited.validate()
    tlsRecords = try TLSRecordsFixture()
    try tlsRecords.validate()
} catch {
    print("stun-bench: cannot build the benchmark inputs: \(error)")
    exit(1)
}

let runs = 5
let zeroAllocationGoal = [true, true, false, true, true, true, true, true, true, true, true]
let results = [
    Measurement.run("(a) parse Binding request + FINGERPRINT + MI verify", iterations: iterations, runs: runs) {
        parseAndVerifyRequest(fixture, iterations: $0)
    },
    Measurement.run("(b) parse ChannelData, 100-byte payload", iterations: iterations, runs: runs) {
        parseChannelData(fixture, iterations: $0)
    },
    Measurement.run("(c) build Binding success: XOR-MAPPED-ADDRESS+MI+FP", iterations: iterations, runs: runs) {
        buildBindingSuccess(fixture, iterations: $0)
    },
    Measurement.run("(d) relay: client ChannelData -> peer (core)", iterations: iterations, runs: runs) {
        relayClientToPeer(relay, iterations: $0)
    },
    Measurement.run("(e) relay: peer -> client as ChannelData (core)", iterations: iterations, runs: runs) {
        relayPeerToClientChannel(relay, iterations: $0)
    },
    Measurement.run("(f) relay: peer -> client as Data indication (core)", iterations: iterations, runs: runs) {
        relayPeerToClientIndication(relay, iterations: $0)
    },
    Measurement.run("(g) relay: client -> client short-circuit (core)", iterations: iterations, runs: runs) {
        relayShortCircuit(relay, iterations: $0)
    },
    Measurement.run("(h) relay: client -> client on another loop (core)", iterations: iterations, runs: runs) {
        relayCrossLoop(crossLoop, iterations: $0)
    },
    Measurement.run("(i) relay: client -> TCP client on another loop (core)", iterations: iterations, runs: runs) {
        relayToStream(toStream, iterations: $0)
    },
    Measurement.run("(j) relay: client ChannelData -> peer, max-bps budget (core)", iterations: iterations, runs: runs) {
        relayClientToPeer(limited, iterations: $0)
    },
    Measurement.run("(k) TLS 1.3 record, 104 B, sealed and opened each way", iterations: iterations, runs: runs) {
        tlsRecordsRoundTrip(tlsRecords, iterations: $0)
    },
]

print("stun-bench: \(iterations) iterations x \(runs) runs; ns/op is the median run (fastest-slowest)")
print(
    leftAligned("benchmark", 54) + rightAligned("ns/op", 10) + rightAligned("(range)", 18)
        + rightAligned("allocs/op", 11))
for result in results {
    let (median, fastest, slowest) = result.nsPerOp
    let allocations = result.allocations == 0 ? "0" : fixed(result.allocationsPerOp, decimals: 3)
    print(
        leftAligned(result.name, 54) + rightAligned(fixed(median, decimals: 1), 10)
            + rightAligned("(\(fixed(fastest, decimals: 1))-\(fixed(slowest, decimals: 1)))", 18)
            + rightAligned(allocations, 11))
}

if assertZeroAlloc {
    var failed = false
    for (result, mustNotAllocate) in zip(results, zeroAllocationGoal) where mustNotAllocate && result.allocations > 0 {
        print(
            "stun-bench: FAIL: \(result.name) made \(result.allocations) heap allocations"
                + " in \(result.operations) operations")
        failed = true
    }
    if failed { exit(1) }
    print("stun-bench: zero-allocation check passed for (a), (b), the relay data path (d)-(j) and TLS records (k)")
}
