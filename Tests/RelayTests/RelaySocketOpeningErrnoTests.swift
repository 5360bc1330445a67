import Glibc
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport
@testable import Relay

/// How a failed relay socket open is told to the core (docs/benchmark.md, "Node capacity"): only
/// a port another socket holds leaves the search for a while.
@Suite struct RelaySocketOpeningErrnoTests {
    @Test("EADDRINUSE is a port in use; out of descriptors or memory is exhausted; anything else a failure of that port")
    func byErrno() {
        #expect(RelaySocketOpening(failure: EADDRINUSE) == .portInUse)
        for errno in [EMFILE, ENFILE, ENOBUFS, ENOMEM] { #expect(RelaySocketOpening(failure: errno) == .exhausted) }
        for errno in [EADDRNOTAVAIL, EACCES, EAFNOSUPPORT, EINVAL] { #expect(RelaySocketOpening(failure: errno) == .failed) }
    }

    @Test("A relay port bound by another socket fails with EADDRINUSE, so it is counted foreign")
    func realBind() throws {
        let holder = try #require(UDPSocket.open(bound: .literal("127.0.0.1:0"), reusePort: false))
        defer { close(holder) }
        var storage = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(holder, $0, &length) }
        }
        let port = UInt16(bigEndian: storage.sin_port)
        let second = UDPSocket.open(bound: .literal("127.0.0.1:\(port)"), reusePort: false)
        let failure = errno
        #expect(second == nil)
        #expect(RelaySocketOpening(failure: failure) == .portInUse)
    }
}
