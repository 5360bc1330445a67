import CLibevent
import Glibc
import StunCodec
import Testing

@testable import Relay

/// The listeners' SO_REUSEPORT selector (`relayd_attach_listener_selector`, docs/mobility.md) in
/// the real kernel: datagrams go to the first `loops` sockets of the group only, by client, so a
/// socket that joins later (a moved client's, before it is connected) takes nobody's datagrams,
/// and each client keeps its listener.
@Suite struct ListenerSelectorTests {
    private func listener(port: UInt16, ip: IPAddress = .ipv4Loopback) throws -> Int32 {
        let fd = try #require(UDPSocket.open(bound: TransportAddress(ip: ip, port: port), reusePort: true))
        #expect(relayd_attach_listener_selector(fd, ip.family == .ipv6 ? 1 : 0, 2) == 0)
        return fd
    }

    /// The source ports of the datagrams waiting on `fd`.
    private func drain(_ fd: Int32) -> Set<UInt16> {
        var ports: Set<UInt16> = []
        var buffer = [UInt8](repeating: 0, count: 64)
        var source = sockaddr_storage()
        while true {
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let n = withUnsafeMutablePointer(to: &source) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT), $0, &length)
                }
            }
            if n < 0 { return ports }
            // sin_port and sin6_port sit at the same offset.
            let port = withUnsafeBytes(of: &source) { UInt16($0[2]) << 8 | UInt16($0[3]) }
            ports.insert(port)
        }
    }

    /// A client socket of either family on loopback.
    private final class Client {
        let fd: Int32
        let address: TransportAddress
        init(ip: IPAddress) throws {
            let fd = try #require(UDPSocket.open(bound: TransportAddress(ip: ip, port: 0), reusePort: false))
            self.fd = fd
            var name = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            _ = withUnsafeMutablePointer(to: &name) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            address = TransportAddress(ip: ip, port: withUnsafeBytes(of: &name) { UInt16($0[2]) << 8 | UInt16($0[3]) })
        }
        deinit { close(fd) }
        func send(_ bytes: [UInt8], to destination: TransportAddress) throws {
            var storage = sockaddr_storage()
            let sent = withUnsafeMutableBytes(of: &storage) { raw -> Int in
                let length = SocketAddress.write(destination, into: raw.baseAddress!)
                return sendto(fd, bytes, bytes.count, 0, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
            }
            try #require(sent == bytes.count)
        }
    }

    /// Runs `body` with the calling thread pinned to `cpu`, then gives the thread its CPUs back.
    /// glibc declares sched_setaffinity only under _GNU_SOURCE, so it is looked up by name.
    private func onCPU<T>(_ cpu: Int, _ body: () throws -> T) throws -> T {
        typealias Affinity = @convention(c) (pid_t, Int, UnsafeMutableRawPointer) -> Int32
        let get = unsafeBitCast(try #require(dlsym(nil, "sched_getaffinity")), to: Affinity.self)
        let set = unsafeBitCast(try #require(dlsym(nil, "sched_setaffinity")), to: Affinity.self)
        var saved = [UInt64](repeating: 0, count: 16)
        var only = [UInt64](repeating: 0, count: 16)
        only[cpu / 64] = 1 << UInt64(cpu % 64)
        try #require(saved.withUnsafeMutableBytes { get(0, $0.count, $0.baseAddress!) } >= 0)
        try #require(only.withUnsafeMutableBytes { set(0, $0.count, $0.baseAddress!) } == 0)
        defer { _ = saved.withUnsafeMutableBytes { set(0, $0.count, $0.baseAddress!) } }
        return try body()
    }

    @Test(
        "ListenerSelector names the listener the kernel's selector picks for each client (restored allocations go there)",
        arguments: [IPAddress.ipv4Loopback, IPAddress.ipv6Loopback])
    func swiftSelectorMatchesTheKernel(ip: IPAddress) throws {
        let port = try UDPTestSocket.freePort()
        let listeners = try (0..<3).map { _ in try listener3(port: port, ip: ip) }
        defer { for fd in listeners { close(fd) } }
        let clients = try (0..<60).map { _ in try Client(ip: ip) }
        let server = TransportAddress(ip: ip, port: port)
        for client in clients { try client.send([1], to: server) }
        usleep(100_000)
        let received = listeners.map { drain($0) }
        #expect(received.reduce(0) { $0 + $1.count } == clients.count)
        #expect(received.allSatisfy { !$0.isEmpty }, "every listener gets clients")
        for client in clients {
            let expected = ListenerSelector.loop(for: client.address, loops: 3)
            #expect(received[expected].contains(client.address.port), "\(client.address) expected on listener \(expected)")
        }
    }

    private func listener3(port: UInt16, ip: IPAddress) throws -> Int32 {
        let fd = try #require(UDPSocket.open(bound: TransportAddress(ip: ip, port: port), reusePort: true))
        #expect(relayd_attach_listener_selector(fd, ip.family == .ipv6 ? 1 : 0, 3) == 0)
        return fd
    }

    @Test("A socket that joins the group later gets no datagram; every client stays on its listener")
    func laterSocketsAreNeverChosen() throws {
        let port = try UDPTestSocket.freePort()
        let first = try listener(port: port)
        let second = try listener(port: port)
        defer {
            close(first)
            close(second)
        }
        let clients = try (0..<40).map { _ in try UDPTestSocket() }
        let server = TransportAddress(ip: .ipv4Loopback, port: port)
        func round() throws -> (Set<UInt16>, Set<UInt16>) {
            for client in clients { try client.send([1], to: server) }
            usleep(100_000)
            return (drain(first), drain(second))
        }
        let (before1, before2) = try round()
        #expect(before1.count + before2.count == clients.count)
        #expect(!before1.isEmpty && !before2.isEmpty, "the selector spreads clients over both listeners")
        let late = try #require(UDPSocket.open(bound: server, reusePort: true))
        defer { close(late) }
        let (after1, after2) = try round()
        #expect(drain(late).isEmpty)
        #expect(after1 == before1 && after2 == before2)
    }

    @Test(
        "Moved clients' connected sockets take only their own client's datagrams, from any CPU, before and after they close",
        arguments: [IPAddress.ipv4Loopback, IPAddress.ipv6Loopback])
    func movedClientsLeaveEveryoneElseOnTheirListener(ip: IPAddress) throws {
        let port = try UDPTestSocket.freePort()
        let first = try listener(port: port, ip: ip)
        let second = try listener(port: port, ip: ip)
        defer {
            close(first)
            close(second)
        }
        let server = TransportAddress(ip: ip, port: port)
        let clients = try (0..<40).map { _ in try Client(ip: ip) }
        let movers = try (0..<3).map { _ in try Client(ip: ip) }
        let cpus = max(1, min(Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), 8))
        func round(on cpu: Int, also others: [Int32] = []) throws -> (Set<UInt16>, Set<UInt16>, Int) {
            try onCPU(cpu) { for client in clients { try client.send([1], to: server) } }
            usleep(50_000)
            return (drain(first), drain(second), others.reduce(0) { $0 + drain($1).count })
        }
        let (before1, before2, _) = try round(on: 0)
        #expect(before1.count + before2.count == clients.count)
        #expect(!before1.isEmpty && !before2.isEmpty, "the selector spreads clients over both listeners")
        func expectEveryClientOnItsListener(_ step: String, also others: [Int32] = []) throws {
            for cpu in 0..<cpus {
                let (after1, after2, elsewhere) = try round(on: cpu, also: others)
                #expect(after1 == before1 && after2 == before2 && elsewhere == 0, "\(step), from CPU \(cpu)")
            }
        }
        // Moves one after the other, as a loop does them: the new client's socket is bound (and
        // sits in the group unconnected) while the previous one is still open and connected.
        var previous: Int32?
        for (index, mover) in movers.enumerated() {
            let late = try #require(UDPSocket.open(bound: server, reusePort: true))
            try expectEveryClientOnItsListener("move \(index): a socket bound, not yet connected", also: [late] + (previous.map { [$0] } ?? []))
            close(late)
            let moved = try #require(UDPSocket.openSteered(bound: server, connectedTo: mover.address))
            try expectEveryClientOnItsListener("move \(index): connected", also: [moved] + (previous.map { [$0] } ?? []))
            for cpu in 0..<cpus {
                try onCPU(cpu) { try mover.send([2], to: server) }
                usleep(20_000)
                #expect(drain(moved) == [mover.address.port], "move \(index): the moved client reaches its socket from CPU \(cpu)")
                #expect(drain(first).isEmpty && drain(second).isEmpty)
            }
            if let previous { close(previous) }
            previous = moved
            try expectEveryClientOnItsListener("move \(index): the previous socket closed", also: [moved])
        }
        if let previous { close(previous) }
        try expectEveryClientOnItsListener("every moved client's socket closed")
    }
}
