import Glibc

/// relay-bench: a TURN load generator for relayd and coturn. See BenchOptions.usage.
let options: BenchOptions
do {
    options = try BenchOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    if error.isHelp {
        Output.out(error.message)
        exit(0)
    }
    Output.err("relay-bench: \(error.message)")
    exit(2)
}
signal(SIGPIPE, SIG_IGN)
let descriptors = UDPEndpoint.raiseDescriptorLimit()
let needed = max(options.idleAllocations, options.setupOnly ? options.allocations : 2 * options.pairs) + 64
if descriptors < needed {
    Report.note("descriptor limit \(descriptors) is below the \(needed) needed; raise ulimit -n")
}

var report = Report()
report.set("label", options.label)
report.set("server", "\(options.server)")
report.set("transport", options.transport.rawValue)
let human: String
do {
    if options.handshakeSeconds > 0 {
        report.set("mode", "handshakes")
        report.set("resume", options.resume ? 1 : 0)
        report.set("concurrency", options.concurrency)
        let r = HandshakeBench.run(options)
        report.set("handshakes", r.completed)
        report.set("resumed", r.resumed)
        report.set("failed", r.failed)
        report.set("seconds", r.seconds)
        let rate = r.seconds > 0 ? Double(r.completed) / r.seconds : 0
        report.set("handshake_rate", rate)
        if let cpu = r.serverCPU, r.completed > 0 { report.set("server_cpu_ms_per_handshake", cpu * 1000 / Double(r.completed)) }
        human = "handshakes: \(r.completed) in \(r.seconds) s (\(Int(rate))/s), resumed \(r.resumed), failed \(r.failed)"
    } else if options.idleAllocations > 0 {
        report.set("mode", "idle")
        report.set("allocations", options.idleAllocations)
        human = BenchModes.idle(options, report: &report)
    } else if options.setupOnly {
        report.set("mode", "setup")
        report.set("allocations", options.allocations)
        report.set("window", options.window)
        human = BenchModes.setupOnly(options, report: &report)
    } else {
        report.set("mode", "traffic")
        report.set("pattern", options.pattern.rawValue)
        report.set("framing", options.sendIndications ? "send-indication" : "channel-data")
        report.set("pairs", options.pairs)
        report.set("payload", options.payloadSize)
        report.set("rate", options.rate)
        report.set("duration", options.duration)
        human = try BenchModes.traffic(options, report: &report)
    }
} catch let error as OptionError {
    Output.err("relay-bench: \(error.message)")
    exit(1)
} catch {
    Output.err("relay-bench: \(error)")
    exit(1)
}
report.emit(human: human)
