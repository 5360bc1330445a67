import CLibevent
import Glibc
import StunCodec

extension BenchModes {
    /// The baseline without a relay (`--direct`): the same clients, rate and payloads, each
    /// client sending raw UDP straight to its far end (the echo peer, or its partner's socket).
    /// What the machine spends on it is what the endpoints and the path between them cost; a
    /// relay's own share is its run's figure minus this one (docs/kernel-fast-path.md).
    static func directTraffic(_ options: BenchOptions, report: inout Report) throws -> String {
        let clients = ClientFleet.make(count: 2 * options.pairs, options: options, bufferBytes: 4 << 20)
        defer { ClientFleet.close(clients) }
        guard clients.count == 2 * options.pairs else { throw OptionError("could not open every client socket") }
        let echo = options.pattern == .externalPeer ? try EchoPeer.make(options) : nil
        let own = clients.map { UDPEndpoint.localAddress($0.fd) }
        for client in clients {
            guard let far = echo?.address ?? own[client.index ^ 1], UDPEndpoint.connect(client.fd, to: far) else {
                throw OptionError("cannot connect client \(client.index) to its far end")
            }
            client.peer = far
        }
        if let echo, !options.flowsFile.isEmpty { return holdFlows(clients, echo: echo, options: options, report: &report) }
        let expected = clients.map { echo != nil ? $0.index : $0.index ^ 1 }
        report.set("direct", 1)
        report.set("active_clients", clients.count)
        let summary = try DataPhase(options: options, clients: clients, expectedFlow: expected).run(
            into: &report, echo: echo)
        return "direct (no relay) \(options.pattern.rawValue) \(options.payloadSize)B @\(fmt(options.rate, 0))/s, "
            + "\(clients.count) clients: " + summary
    }
}

extension EchoPeer {
    /// The external-peer pattern's echo peer at `--peer-ip` (default: the server's address),
    /// opened inside `--peer-netns` when given.
    static func make(_ options: BenchOptions) throws -> EchoPeer {
        let ip = options.peerIP ?? options.server.ip
        guard let peer = try NetworkNamespace.run(in: options.peerNamespace, { EchoPeer(ip: ip) }) else {
            throw OptionError("cannot open the echo peer socket on \(ip)")
        }
        return peer
    }
}

/// Opening a socket inside another network namespace: the calling thread enters it (setns),
/// the socket stays in it for its whole life, and the thread returns to its own.
enum NetworkNamespace {
    static func run<T>(in name: String, _ body: () -> T) throws -> T {
        guard !name.isEmpty else { return body() }
        let target = open("/run/netns/\(name)", O_RDONLY | O_CLOEXEC)
        let home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)
        defer {
            if target >= 0 { close(target) }
            if home >= 0 { close(home) }
        }
        guard target >= 0, home >= 0, relayd_setns(target, RELAYD_CLONE_NEWNET) == 0 else {
            throw OptionError("cannot enter network namespace \(name): \(String(cString: strerror(errno)))")
        }
        defer { _ = relayd_setns(home, RELAYD_CLONE_NEWNET) }
        return body()
    }
}
