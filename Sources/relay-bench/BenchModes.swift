import Glibc
import StunCodec

/// The three things relay-bench can do: traffic, allocation setup rate, idle allocations.
enum BenchModes {
    /// Allocations per second for `options.allocations` fresh clients (401 + authenticated Allocate),
    /// and with `--server-pid` the server's CPU per allocation over the same window
    /// (`setup_server_cpu_us`): this machine's two cores run relay-bench too, so the rate is
    /// the pair's, while the CPU is the server's alone.
    static func setupOnly(_ options: BenchOptions, report: inout Report) -> String {
        let clients = ClientFleet.make(count: options.allocations, options: options, bufferBytes: 65_536)
        let setup = SetupPhase(clients: clients, options: options)
        let cpuBefore = options.serverPID > 0 ? ProcessCPU.seconds(pid: options.serverPID) : nil
        let ownBefore = ProcessCPU.ownSeconds()
        let tally = setup.allocate(Array(clients.indices), bufferBytes: 65_536)
        let ownCPU = ProcessCPU.ownSeconds() - ownBefore
        record(tally, as: "setup", into: &report)
        if tally.succeeded > 0 {
            if let before = cpuBefore, let after = ProcessCPU.seconds(pid: options.serverPID) {
                report.set("setup_server_cpu_us", (after - before) * 1e6 / Double(tally.succeeded))
            }
            report.set("setup_bench_cpu_us", ownCPU * 1e6 / Double(tally.succeeded))
        }
        let ok = clients.indices.filter { clients[$0].relayed != nil }
        record(setup.release(ok), as: "release", into: &report)
        ClientFleet.close(clients)
        return "setup \(tally.succeeded)/\(options.allocations) allocations at \(fmt(tally.ratePerSecond, 0))/s, "
            + "failures \(tally.failuresJSON), retransmits \(tally.retransmits)"
    }

    /// Creates `options.idleAllocations` allocations, refreshes them once, signals readiness,
    /// holds them (refreshing at half the lifetime), then deletes them.
    ///
    /// Stream clients connect and allocate `streamBatch` at a time: a connection without an
    /// allocation is pending, and a server bounds one source's pending connections (relayd's
    /// share is half of `max-pending-connections`, docs/rate-limits.md), so a fleet that
    /// connected all at once would measure that bound instead of the allocations. For the same
    /// reason (one source's share of `max-connections`), towards a loopback server each batch
    /// connects from its own loopback address, 127.1.0.1 on: many clients, many addresses.
    static func idle(_ options: BenchOptions, report: inout Report) -> String {
        let batch = options.transport == .udp ? options.idleAllocations : streamBatch
        var clients: [TurnClient] = []
        var tally = SetupTally()
        while clients.count < options.idleAllocations {
            let count = min(batch, options.idleAllocations - clients.count)
            let number = clients.count / batch
            let source =
                options.transport != .udp && options.server.ip.isLoopback && options.server.ip.ipv4Value != nil
                ? IPAddress(ipv4: 0x7F01_0001 + UInt32(number)) : nil
            let some = ClientFleet.make(
                count: count, options: options, bufferBytes: 16_384, first: clients.count, source: source)
            tally.merge(SetupPhase(clients: some, options: options).allocate(Array(some.indices), bufferBytes: 16_384))
            clients += some
            if some.count < count { break }
        }
        let setup = SetupPhase(clients: clients, options: options)
        record(tally, as: "setup", into: &report)
        let ok = clients.indices.filter { clients[$0].relayed != nil }
        let refreshed = setup.refresh(ok)
        record(refreshed, as: "refresh", into: &report)
        if !options.readyFile.isEmpty, let f = fopen(options.readyFile, "w") {
            fputs("\(ok.count)\n", f)
            fclose(f)
        }
        Report.note("holding \(ok.count) allocations for \(fmt(options.hold))s")
        let end = Clock.now() + UInt64(options.hold * 1e9)
        let refreshEvery = UInt64(max(Double(options.lifetime) / 2, 1) * 1e9)
        var nextRefresh = Clock.now() + refreshEvery
        while Clock.now() < end {
            Clock.sleep(until: min(end, nextRefresh))
            if Clock.now() >= nextRefresh && Clock.now() < end {
                _ = setup.refresh(ok)
                nextRefresh = Clock.now() + refreshEvery
            }
        }
        report.set("held", ok.count)
        record(setup.release(ok, seconds: 5), as: "release", into: &report)
        ClientFleet.close(clients)
        return "idle: \(ok.count)/\(options.idleAllocations) allocations up at \(fmt(tally.ratePerSecond, 0))/s, "
            + "refresh ok \(refreshed.succeeded), failures \(tally.failuresJSON)"
    }

    /// Stream clients connected at once by `idle`, each batch allocating before the next
    /// connects.
    static let streamBatch = 1_000

    /// Sets up the pairs, runs paced traffic, reports it, deletes the allocations.
    static func traffic(_ options: BenchOptions, report: inout Report) throws -> String {
        if options.direct { return try directTraffic(options, report: &report) }
        let clients = ClientFleet.make(count: 2 * options.pairs, options: options, bufferBytes: 4 << 20)
        let setup = SetupPhase(clients: clients, options: options)
        let echo = options.pattern == .externalPeer ? try EchoPeer.make(options) : nil
        let all = Array(clients.indices)
        let allocated = setup.allocate(all, bufferBytes: 4 << 20)
        record(allocated, as: "setup", into: &report)
        for c in clients {
            if let echo { c.peer = echo.address } else { c.peer = clients[c.index ^ 1].relayed }
        }
        // Pairs (or, with an echo peer, single clients) whose allocations all succeeded.
        let usable = all.filter { i in
            clients[i].relayed != nil && (echo != nil || (clients[i ^ 1].relayed != nil))
        }
        let connected = setup.connect(usable, channels: !options.sendIndications)
        record(connected, as: "connect", into: &report)
        let active = usable.map { clients[$0] }
        var position: [Int: Int] = [:]
        for (p, c) in active.enumerated() { position[c.index] = p }
        let expected = active.map { c in echo != nil ? position[c.index]! : position[c.index ^ 1] ?? -1 }
        report.set("active_clients", active.count)
        guard !active.isEmpty else {
            ClientFleet.close(clients)
            return "no client finished setup: allocate failures \(allocated.failuresJSON), "
                + "permission/channel failures \(connected.failuresJSON)"
        }
        if let echo, !options.flowsFile.isEmpty {
            let held = holdFlows(active, echo: echo, options: options, report: &report)
            record(setup.release(usable), as: "release", into: &report)
            ClientFleet.close(clients)
            return held
        }
        let summary = try DataPhase(options: options, clients: active, expectedFlow: expected).run(
            into: &report, echo: echo)
        record(setup.release(usable), as: "release", into: &report)
        ClientFleet.close(clients)
        let failures = allocated.failed + connected.failed
        return "\(options.pattern.rawValue) \(options.payloadSize)B @\(fmt(options.rate, 0))/s, "
            + "\(active.count) clients (setup failures \(failures)): " + summary
    }

    /// Adds a tally's fields under `prefix`.
    static func record(_ tally: SetupTally, as prefix: String, into report: inout Report) {
        report.set("\(prefix)_ok", tally.succeeded)
        report.set("\(prefix)_failed", tally.failed)
        report.setRaw("\(prefix)_failures", tally.failuresJSON)
        report.set("\(prefix)_retransmits", tally.retransmits)
        report.set("\(prefix)_reopened_after_437", tally.reopened)
        report.set("\(prefix)_rate", tally.ratePerSecond)
        report.set("\(prefix)_seconds", Double(tally.elapsedNs) / 1e9)
    }
}
