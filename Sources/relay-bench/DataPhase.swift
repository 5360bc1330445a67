import Glibc
import StunCodec

/// Paced traffic through the relay between clients that are already set up, measured over a
/// window after a warmup; counts and latency come from the receiver, CPU from /proc.
struct DataPhase {
    let options: BenchOptions
    /// Clients taking part (setup succeeded), in flow order.
    let clients: [TurnClient]
    /// For each client position, the flow it receives.
    let expectedFlow: [Int]

    /// Runs the phase and adds its results to `report`; returns the human summary.
    func run(into report: inout Report, echo: EchoPeer?) throws -> String {
        let framing: DataFraming = options.direct ? .raw : options.sendIndications ? .sendIndication : .channelData
        let sender = try PacedSender(
            clients: clients, framing: framing, payloadSize: options.payloadSize, rate: options.rate)
        let perFlow = options.rate / Double(max(clients.count, 1)) * (options.warmup + options.duration + 1) * 1.2
        let receiver = Receiver(
            clients: clients, expectedFlow: expectedFlow, payloadSize: options.payloadSize, raw: options.direct,
            maxSequence: Int(perFlow) + 1024)
        let start = Clock.now() + 20_000_000
        let measureStart = start + UInt64(options.warmup * 1e9)
        let measureEnd = measureStart + UInt64(options.duration * 1e9)
        sender.measureStart = measureStart
        sender.measureEnd = measureEnd
        receiver.measureStart = measureStart

        let echoThread = echo.map { peer in ThreadRunner.spawn { peer.run() } }
        var serverBefore: Double? = nil
        var serverAfter: Double? = nil
        var ownBefore = 0.0
        var ownAfter = 0.0
        var systemBefore: Double? = nil
        var systemAfter: Double? = nil
        var echoBefore: (cpu: Double?, echoed: UInt64) = (nil, 0)
        var echoAfter: (cpu: Double?, echoed: UInt64) = (nil, 0)
        func sampleStart() {
            serverBefore = options.serverPID > 0 ? ProcessCPU.seconds(pid: options.serverPID) : nil
            ownBefore = ProcessCPU.ownSeconds()
            systemBefore = ProcessCPU.systemSeconds()
            if let echo { echoBefore = (echo.cpuSecondsNow(), echo.echoed.load(ordering: .relaxed)) }
        }
        func sampleEnd() {
            serverAfter = options.serverPID > 0 ? ProcessCPU.seconds(pid: options.serverPID) : nil
            ownAfter = ProcessCPU.ownSeconds()
            systemAfter = ProcessCPU.systemSeconds()
            if let echo { echoAfter = (echo.cpuSecondsNow(), echo.echoed.load(ordering: .relaxed)) }
        }
        if options.transport != .udp {
            // OpenSSL objects are not shared between threads: send and receive on this one (a
            // plain TCP stream too: its framing buffer is the stream's).
            receiver.open()
            Clock.sleep(until: start)
            var sampled = false
            while true {
                let now = Clock.now()
                if !sampled && now >= measureStart {
                    sampleStart()
                    sampled = true
                }
                if now >= measureEnd { break }
                let next = sender.sendDue(start: start, now: now)
                // As the UDP sender thread: wake for the next due packet, at most every 100 µs.
                receiver.runOnce(until: max(next, Clock.now() &+ 100_000))
            }
            sampleEnd()
            let drainEnd = Clock.now() + UInt64(options.drainMs) * 1_000_000
            while Clock.now() < drainEnd { receiver.runOnce(until: drainEnd) }
            receiver.close()
            sender.finishOnThisThread()
        } else {
            let receiverThread = ThreadRunner.spawn { receiver.run() }
            let senderThread = ThreadRunner.spawn { sender.run(start: start) }
            Clock.sleep(until: measureStart)
            sampleStart()
            Clock.sleep(until: measureEnd)
            sampleEnd()
            ThreadRunner.join(senderThread)
            Clock.sleep(nanoseconds: UInt64(options.drainMs) * 1_000_000)
            receiver.stop.store(true, ordering: .relaxed)
            ThreadRunner.join(receiverThread)
        }
        if let echo, let echoThread {
            echo.stop.store(true, ordering: .relaxed)
            ThreadRunner.join(echoThread)
        }

        let sent = sender.sentInWindow
        let received = receiver.received
        let lost = sent > received ? sent - received : 0
        let lossPct = sent == 0 ? 0 : Double(lost) / Double(sent) * 100
        let roundTrip = options.pattern == .externalPeer
        let divisor: UInt64 = roundTrip ? 2 : 1
        func us(_ q: Double) -> Double { Double(receiver.latency.quantile(q) / divisor) / 1000 }
        let relayed = received * 2
        let serverCPU = (serverBefore != nil && serverAfter != nil) ? serverAfter! - serverBefore! : Double.nan
        let ownCPU = ownAfter - ownBefore

        report.set("sent", sent)
        report.set("received", received)
        report.set("lost", lost)
        report.set("loss_pct", lossPct)
        report.set("duplicates", receiver.tracker.duplicates)
        report.set("reordered", receiver.tracker.reordered)
        report.set("corrupted", receiver.corrupted)
        report.set("send_refused", sender.refused)
        report.set("achieved_rate", Double(sent) / options.duration)
        report.set("latency_basis", roundTrip ? "rtt/2" : "one-way")
        report.set("lat_p50_us", us(0.5))
        report.set("lat_p99_us", us(0.99))
        report.set("lat_p999_us", us(0.999))
        report.set("lat_max_us", Double(receiver.latency.maximum / divisor) / 1000)
        report.set("send_delay_p50_us", Double(sender.sendDelay.quantile(0.5)) / 1000)
        report.set("send_delay_p99_us", Double(sender.sendDelay.quantile(0.99)) / 1000)
        report.set("relayed_packets", relayed)
        report.set("server_cpu_s", serverCPU)
        report.set("server_cpu_s_per_mpkt", relayed == 0 ? .nan : serverCPU / (Double(relayed) / 1e6))
        let systemCPU = systemBefore.flatMap { a in systemAfter.map { $0 - a } } ?? .nan
        report.set("system_cpu_s", systemCPU)
        report.set("system_cpu_s_per_mpkt", relayed == 0 ? .nan : systemCPU / (Double(relayed) / 1e6))
        report.set("bench_cpu_s", ownCPU)
        report.set("bench_cpu_pct", ownCPU / options.duration * 100)
        report.set("recv_syscalls", receiver.syscalls)
        report.set("recv_datagrams", receiver.datagrams)
        report.set("bench_sender_cpu_s", sender.cpuSeconds)
        report.set("bench_receiver_cpu_s", receiver.cpuSeconds)
        if let echo {
            report.set("echoed", echo.echoed.load(ordering: .relaxed))
            report.set("bench_echo_cpu_s", echo.cpuSeconds)
            // The echo peer over the same window: each datagram it echoes is one receive and one
            // send, as each packet relayed to or from a peer is for the server.
            let echoCPU = echoBefore.cpu.flatMap { a in echoAfter.cpu.map { $0 - a } } ?? .nan
            let echoedInWindow = echoAfter.echoed &- echoBefore.echoed
            report.set("echo_cpu_s", echoCPU)
            report.set("echo_cpu_s_per_mpkt", echoedInWindow == 0 ? .nan : echoCPU / (Double(echoedInWindow) / 1e6))
        }

        return "sent \(sent) recv \(received) loss \(fmt(lossPct, 3))% dup \(receiver.tracker.duplicates) "
            + "reord \(receiver.tracker.reordered) corrupt \(receiver.corrupted) | "
            + "\(roundTrip ? "rtt/2" : "one-way") p50 \(fmt(us(0.5))) p99 \(fmt(us(0.99))) p99.9 \(fmt(us(0.999))) us | "
            + "server \(fmt(serverCPU, 2)) cpu-s = \(fmt(serverCPU / (Double(relayed) / 1e6), 2)) s/Mpkt | "
            + "bench cpu \(fmt(ownCPU / options.duration * 100, 0))%"
    }
}
