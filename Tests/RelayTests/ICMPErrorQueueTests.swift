import CLibevent
import Glibc
import StunCodec
import Testing

@testable import CoreTestSupport
@testable import Relay

/// A relay socket's error queue in the real kernel (docs/icmp.md): an ICMP port unreachable for
/// a datagram sent to a closed loopback port is read back with its destination and mapped to the
/// ICMP attribute of RFC 8656 §18.13; the pending error it leaves does not cost the next datagram.
@Suite struct ICMPErrorQueueTests {
    /// A loopback port with nothing listening (bound once, then closed).
    private func closedPort(_ ip: IPAddress) throws -> TransportAddress {
        let fd = try #require(UDPSocket.open(bound: TransportAddress(ip: ip, port: 0), reusePort: false))
        defer { close(fd) }
        return try #require(boundAddress(fd))
    }

    private func boundAddress(_ fd: Int32) -> TransportAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutableBytes(of: &storage) { raw in
            guard getsockname(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length) == 0 else { return nil }
            return SocketAddress.read(raw.baseAddress!)
        }
    }

    /// Waits up to 2 s for POLLERR (an entry on the error queue, or a pending error).
    private func waitForError(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: 0, revents: 0)
        return poll(&entry, 1, 2000) == 1 && entry.revents & Int16(POLLERR) != 0
    }

    private func send(_ bytes: [UInt8], from fd: Int32, to destination: TransportAddress) -> UInt64 {
        let batch = SendBatch(capacity: 1)
        bytes.withUnsafeBytes { raw in
            batch.stage(0, bytes: raw, to: destination)
            batch.send(count: 1, from: fd)
        }
        return batch.failed
    }

    @Test(
        "Port unreachable for a closed port: the destination and ICMP (3, 3) / ICMPv6 (1, 4) come off the queue",
        arguments: ["127.0.0.1", "::1"])
    func portUnreachable(loopback: String) throws {
        let ip = IPAddress.literal(loopback)
        guard let fd = UDPSocket.open(bound: TransportAddress(ip: ip, port: 0), reusePort: false) else {
            // No IPv6 loopback on this machine: nothing to test for that family.
            #expect(ip.family == .ipv6)
            return
        }
        defer { close(fd) }
        #expect(UDPSocket.enableErrorQueue(fd, family: ip.family))
        let closed = try closedPort(ip)
        #expect(send([1, 2, 3], from: fd, to: closed) == 0)
        #expect(waitForError(fd))
        let entry = try #require(UDPSocket.readQueuedError(fd))
        guard case .datagram(let destination, let icmp, let local) = entry else {
            Issue.record("unusable entry \(entry)")
            return
        }
        #expect(destination == closed)
        #expect(!local)
        let expected = ip.family == .ipv4 ? ICMP(type: 3, code: 3, errorData: 0) : ICMP(type: 1, code: 4, errorData: 0)
        #expect(icmp == expected)
        #expect(UDPSocket.readQueuedError(fd) == nil)
    }

    @Test("The error left pending by an ICMP does not fail the next datagram to another peer")
    func pendingErrorDoesNotCostADatagram() throws {
        let fd = try #require(UDPSocket.open(bound: .literal("127.0.0.1:0"), reusePort: false))
        defer { close(fd) }
        UDPSocket.enableErrorQueue(fd, family: .ipv4)
        let peer = try UDPTestSocket()
        #expect(send([7], from: fd, to: try closedPort(.ipv4Loopback)) == 0)
        #expect(waitForError(fd))
        // The queue is not read: the socket's pending error fails the first try, which is retried.
        #expect(send([8, 9], from: fd, to: peer.address) == 0)
        #expect(try peer.receive()?.bytes == [8, 9])
    }

    @Test("Which queued errors become an ICMP attribute (RFC 8656 §11.5)")
    func mapping() {
        func map(_ origin: Int32, _ type: UInt8, _ code: UInt8, info: UInt32 = 0, error: Int32 = 0,
                 family: IPAddress.Family = .ipv4) -> ICMP? {
            UDPSocket.icmpAttribute(
                origin: UInt8(origin), type: type, code: code, info: info, error: error, family: family)
        }
        #expect(map(SO_EE_ORIGIN_ICMP, 3, 3, info: 99) == ICMP(type: 3, code: 3, errorData: 0))
        #expect(map(SO_EE_ORIGIN_ICMP, 3, 4, info: 1280) == ICMP(type: 3, code: 4, errorData: 1280))
        #expect(map(SO_EE_ORIGIN_ICMP, 11, 0) == ICMP(type: 11, code: 0, errorData: 0))
        #expect(map(SO_EE_ORIGIN_ICMP, 12, 0) == nil)  // parameter problem: not relayed
        #expect(map(SO_EE_ORIGIN_ICMP6, 2, 0, info: 1280, family: .ipv6) == ICMP(type: 2, code: 0, errorData: 1280))
        #expect(map(SO_EE_ORIGIN_ICMP6, 1, 4, info: 5, family: .ipv6) == ICMP(type: 1, code: 4, errorData: 0))
        #expect(map(SO_EE_ORIGIN_ICMP6, 4, 0, family: .ipv6) == nil)
        #expect(map(SO_EE_ORIGIN_LOCAL, 0, 0, info: 1400, error: EMSGSIZE) == ICMP(type: 3, code: 4, errorData: 1400))
        #expect(
            map(SO_EE_ORIGIN_LOCAL, 0, 0, info: 1400, error: EMSGSIZE, family: .ipv6) == ICMP(type: 2, code: 0, errorData: 1400))
        #expect(map(SO_EE_ORIGIN_LOCAL, 0, 0, info: 0, error: EMSGSIZE) == nil)
        #expect(map(SO_EE_ORIGIN_LOCAL, 0, 0, error: ECONNREFUSED) == nil)
        #expect(map(SO_EE_ORIGIN_TXTIME, 0, 0) == nil)
    }
}
