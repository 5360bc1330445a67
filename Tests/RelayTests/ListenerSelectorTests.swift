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
    private func listener(port: UInt16) throws -> Int32 {
        let fd = try #require(UDPSocket.open(bound: TransportAddress(ip: .ipv4Loopback, port: port), reusePort: true))
        #expect(relayd_attach_listener_selector(fd, 0, 2) == 0)
        return fd
    }

    /// The source ports of the datagrams waiting on `fd`.
    private func drain(_ fd: Int32) -> Set<UInt16> {
        var ports: Set<UInt16> = []
        var buffer = [UInt8](repeating: 0, count: 64)
        var source = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        while true {
            let n = withUnsafeMutablePointer(to: &source) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT), $0, &length)
                }
            }
            if n < 0 { return ports }
            ports.insert(UInt16(bigEndian: source.sin_port))
        }
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
}
