// kernel-loadgen: one side of the benchmark's kernel load generator (docs/kernel-fast-path.md,
// "Max rate"). It sends one direction of the traffic relay-bench set up, with the BPF program
// relayd_loadgen_transmit in live-frames mode (no socket, no copy from user space), and counts
// the other direction where it arrives, with relayd_loadgen_sink on the same interface. Run one
// on each side (client, peer), started together with --start-at. See LoadgenOptions.usage.
import CRelayFastPath
import Glibc

let options: LoadgenOptions
do {
    options = try LoadgenOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    print(error.message)
    exit(error.isHelp ? 0 : 2)
}

/// The interface's link-layer address, from sysfs (`ip netns exec` mounts the namespace's own).
func linkLayerAddress(_ interface: String) -> [UInt8]? {
    guard let file = fopen("/sys/class/net/\(interface)/address", "r") else { return nil }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 64)
    guard fgets(&line, 64, file) != nil else { return nil }
    let bytes = line.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }.split(separator: ":").compactMap { UInt8($0.prefix(2), radix: 16) }
    return bytes.count == 6 ? bytes : nil
}

/// The value at `fraction` of the histogram's packets, in microseconds.
func percentile(_ histogram: [UInt64], _ fraction: Double) -> Int {
    let total = histogram.reduce(0, +)
    guard total > 0 else { return -1 }
    let target = UInt64((Double(total) * fraction).rounded(.up))
    var seen: UInt64 = 0
    for (bucket, count) in histogram.enumerated() {
        seen += count
        if seen >= target { return bucket }
    }
    return histogram.count - 1
}

func processCPUSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

do throws(LoadgenError) {
    let ifindex = Int32(if_nametoindex(options.interface))
    guard ifindex > 0, let sourceMAC = linkLayerAddress(options.interface) else {
        throw LoadgenError("no interface \(options.interface) here")
    }
    let plan = try TrafficPlan(try FlowList.read(options.flowsPath), options: options, sourceMAC: sourceMAC)
    let program = try LoadgenProgram(objectPath: options.objectPath, plan: plan)
    let anchor = Int32(if_nametoindex(options.anchor))
    guard anchor > 0 else { throw LoadgenError("no interface \(options.anchor) here") }
    try program.attach(sink: ifindex, anchor: anchor)
    let pacer = Pacer(rate: options.rate, duration: options.duration)
    let planned = options.startAt == 0 ? Monotonic.now() : Monotonic.fromRealtime(options.startAt)
    Monotonic.sleep(until: planned)
    // A late start (loading took longer than planned) starts the schedule when it can.
    let start = max(planned, Monotonic.now())
    let cpuBefore = processCPUSeconds()
    let end = try pacer.run(from: start) { count throws(LoadgenError) in
        try program.transmit(plan.frame, count: UInt32(count), ifindex: ifindex)
    }
    let cpu = processCPUSeconds() - cpuBefore
    Monotonic.sleep(until: end + UInt64(options.grace * 1e9))
    let received = program.received()
    let histogram = program.latencyHistogram()
    let elapsed = Double(end - start) / 1e9
    let fields: [(String, String)] = [
        ("label", "\"\(options.label)\""), ("side", "\"\(options.side.rawValue)\""),
        ("flows", "\(plan.flows.count)"), ("payload", "\(options.payloadSize)"),
        ("rate", "\(Int(options.rate))"), ("sent", "\(pacer.total)"),
        ("sent_rate", "\(Int(Double(pacer.total) / max(elapsed, 1e-9)))"),
        ("send_seconds", "\(elapsed)"), ("late_start_ms", "\(Double(start - planned) / 1e6)"), ("received", "\(received.packets)"),
        ("received_bytes", "\(received.bytes)"),
        ("lat_p50_us", "\(percentile(histogram, 0.5))"), ("lat_p99_us", "\(percentile(histogram, 0.99))"),
        ("generator_cpu_s", "\(cpu)"),
    ]
    print("{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
} catch {
    print("kernel-loadgen: \(error.message)")
    exit(1)
}
