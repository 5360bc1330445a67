import Glibc
import StunCodec

extension BenchModes {
    /// `--flows-file`: the external-peer clients are set up as for traffic (with `--direct`, only
    /// opened), their flows are written to the file for the kernel load generator
    /// (scripts/bench-fastpath.sh, docs/kernel-fast-path.md), and relay-bench then holds them for
    /// `--hold` seconds without sending anything itself. One line per flow after the peer's:
    ///
    ///     peer PEER_IP PEER_PORT
    ///     flow CLIENT_IP CLIENT_PORT CHANNEL RELAYED_IP RELAYED_PORT
    ///
    /// With `--direct` the channel is 0 and the relayed address is the peer's. The file appears
    /// whole (written aside, then renamed) once every flow is ready.
    static func holdFlows(_ clients: [TurnClient], echo: EchoPeer, options: BenchOptions, report: inout Report) -> String {
        var text = "peer \(echo.address.ip) \(echo.address.port)\n"
        for client in clients {
            guard let local = UDPEndpoint.localAddress(client.fd) else { continue }
            let relayed = options.direct ? echo.address : client.relayed ?? echo.address
            let channel = options.direct ? 0 : client.channel
            text += "flow \(local.ip) \(local.port) \(channel) \(relayed.ip) \(relayed.port)\n"
        }
        let aside = options.flowsFile + ".partial"
        guard let file = fopen(aside, "w") else { return "cannot write \(aside)" }
        fputs(text, file)
        fclose(file)
        rename(aside, options.flowsFile)
        report.set("flows", clients.count)
        Report.note("\(clients.count) flows in \(options.flowsFile); holding them for \(fmt(options.hold))s")
        Clock.sleep(until: Clock.now() + UInt64(options.hold * 1e9))
        return "held \(clients.count) flows for \(fmt(options.hold))s"
    }
}
