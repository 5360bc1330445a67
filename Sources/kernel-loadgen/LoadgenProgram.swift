import CBPF
import CRelayFastPath
import Glibc

/// The generator and the sink (relayd_loadgen.bpf.c) loaded into the kernel with the plan in
/// their maps: the sink attached to the endpoint's interface, the generator to its anchor
/// (links: they go with the process).
final class LoadgenProgram {
    private let object: OpaquePointer
    private let transmitProgram: Int32
    private let sinkProgram: Int32
    private let tally: Int32
    private let latency: Int32
    private var links: [Int32] = []
    private let possibleCPUs = Int(libbpf_num_possible_cpus())

    init(objectPath: String, plan: TrafficPlan) throws(LoadgenError) {
        guard let object = bpf_object__open_file(objectPath, nil), libbpf_get_error(UnsafeRawPointer(object)) == 0
        else { throw LoadgenError("cannot open \(objectPath): build it with scripts/build-bpf.sh") }
        let loaded = bpf_object__load(object)
        guard loaded == 0 else {
            bpf_object__close(object)
            throw LoadgenError("cannot load \(objectPath): \(String(cString: strerror(-loaded))) (root needed)")
        }
        self.object = object
        func map(_ name: String) -> Int32 { bpf_object__find_map_by_name(object, name).map { bpf_map__fd($0) } ?? -1 }
        func program(_ name: String) -> Int32 {
            bpf_object__find_program_by_name(object, name).map { bpf_program__fd($0) } ?? -1
        }
        transmitProgram = program("relayd_loadgen_transmit")
        sinkProgram = program("relayd_loadgen_sink")
        let template = map("relayd_loadgen_template")
        tally = map("relayd_loadgen_tally")
        latency = map("relayd_loadgen_latency")
        let flows = map("relayd_loadgen_flows")
        let config = map("relayd_loadgen_config")
        guard transmitProgram >= 0, sinkProgram >= 0, tally >= 0, latency >= 0, flows >= 0, config >= 0, template >= 0,
            plan.frame.count >= Int(RELAYD_LOADGEN_HEADER_BYTES)
        else {
            bpf_object__close(object)
            throw LoadgenError("\(objectPath) is not the load generator's object")
        }
        for (index, flow) in plan.flows.enumerated() {
            var key = UInt32(index)
            var value = flow
            _ = bpf_map_update_elem(flows, &key, &value, UInt64(BPF_ANY))
        }
        var zero: UInt32 = 0
        var settings = relayd_loadgen_config(flow_count: UInt32(plan.flows.count), reserved: 0)
        let header = Array(plan.frame.prefix(Int(RELAYD_LOADGEN_HEADER_BYTES)))
        guard bpf_map_update_elem(config, &zero, &settings, UInt64(BPF_ANY)) == 0,
            header.withUnsafeBytes({ bpf_map_update_elem(template, &zero, $0.baseAddress, UInt64(BPF_ANY)) }) == 0
        else {
            bpf_object__close(object)
            throw LoadgenError("cannot configure the generator")
        }
    }

    deinit {
        for link in links { close(link) }
        bpf_object__close(object)
    }

    /// Attaches the sink to `ifindex` and the generator to `anchor`, both in native XDP mode. The
    /// sink also lets frames that other programs redirect to `ifindex` arrive (veth delivers them
    /// only to an end that runs NAPI); the generator, attached, stays in the kernel's XDP
    /// dispatcher, which spares each live test run two RCU grace periods (relayd_loadgen.h).
    func attach(sink ifindex: Int32, anchor: Int32) throws(LoadgenError) {
        for (program, target, role) in [(sinkProgram, ifindex, "sink"), (transmitProgram, anchor, "generator")] {
            let link = relayd_xdp_attach_native(target, program)
            guard link >= 0 else {
                throw LoadgenError("cannot attach the \(role): \(String(cString: strerror(-link))) (another XDP program there?)")
            }
            links.append(link)
        }
    }

    /// Transmits `count` copies of `frame` out of `ifindex`, each stamped and given the next
    /// flow's ports.
    func transmit(_ frame: [UInt8], count: UInt32, ifindex: Int32) throws(LoadgenError) {
        let result = frame.withUnsafeBytes {
            relayd_xdp_test_run_live(transmitProgram, $0.baseAddress, UInt32($0.count), ifindex, count)
        }
        guard result == 0 else { throw LoadgenError("live test run failed: \(String(cString: strerror(-result)))") }
    }

    /// The sink's packets and payload bytes, all CPUs.
    func received() -> (packets: UInt64, bytes: UInt64) {
        var values = [relayd_loadgen_tally](repeating: relayd_loadgen_tally(), count: possibleCPUs)
        var key: UInt32 = 0
        guard values.withUnsafeMutableBytes({ bpf_map_lookup_elem(tally, &key, $0.baseAddress) }) == 0 else {
            return (0, 0)
        }
        return values.reduce((0, 0)) { ($0.0 + $1.packets, $0.1 + $1.bytes) }
    }

    /// The sink's one-way latency histogram: packets per microsecond, all CPUs (the last
    /// bucket holds everything slower).
    func latencyHistogram() -> [UInt64] {
        var values = [UInt64](repeating: 0, count: possibleCPUs)
        return (0..<UInt32(RELAYD_LOADGEN_BUCKETS)).map { bucket in
            var key = bucket
            guard values.withUnsafeMutableBytes({ bpf_map_lookup_elem(latency, &key, $0.baseAddress) }) == 0 else {
                return 0
            }
            return values.reduce(0, +)
        }
    }
}
