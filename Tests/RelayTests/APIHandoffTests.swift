import Glibc
import StunCodec
import Testing

@testable import Relay

/// The Unix socket between a loop and the API's evhttp (docs/tls.md, "The API on the same
/// port"): the API learns each passed connection's client from the address of the loop's end,
/// and nothing else can claim one.
@Suite struct APIHandoffTests {
    @Test("A connection the loop made names its client; one forgotten, or made by anyone else, names none")
    func clients() throws {
        let handoff = APIHandoff()
        let listener = try #require(handoff.takeListener())
        #expect(handoff.takeListener() == nil)
        defer { close(listener) }
        let client = TransportAddress(ip: try #require(IPAddress("198.51.100.7")), port: 443)
        let (loopEnd, name) = try #require(handoff.connect(for: client))
        defer { close(loopEnd) }
        let accepted = try acceptOne(listener)
        defer { close(accepted) }
        #expect(handoff.client(ofAccepted: accepted) == client)

        // Someone else's connection to the same listener (its own autobound address).
        let stranger = APIHandoff()
        let strangerListener = try #require(stranger.takeListener())
        close(strangerListener)
        let other = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(other) }
        #expect(connectAbstract(other, to: handoff.name) == 0)
        let foreign = try acceptOne(listener)
        defer { close(foreign) }
        #expect(handoff.client(ofAccepted: foreign) == nil)

        handoff.forget(name)
        #expect(handoff.client(ofAccepted: accepted) == nil)
    }

    @Test("Each process's listener has its own address")
    func names() {
        #expect(APIHandoff().name != APIHandoff().name)
    }

    private func acceptOne(_ listener: Int32) throws -> Int32 {
        var pfd = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        _ = poll(&pfd, 1, 2000)
        let fd = accept(listener, nil, nil)
        try #require(fd >= 0)
        return fd
    }

    private func connectAbstract(_ fd: Int32, to name: [UInt8]) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            path[0] = 0
            for (i, byte) in name.enumerated() where i + 1 < path.count { path[i + 1] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + name.count)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
    }
}
