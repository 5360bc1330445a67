import CRelayFastPath
@testable import FastPath
import Glibc
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport
@testable import Relay

extension KernelFastPathTests {
    static let movedClient = TransportAddress.literal("127.0.0.11:40002")

    @Test("A channel whose client moved: the new route replaces the old one, whose later removal removes nothing")
    func movedClientReplacesRoute() throws {
        let routes = FastPathRoutes(try Self.load())
        let old = Self.route()
        var moved = old
        moved.client = Self.movedClient
        let fromOld = TestPacket.ipv4UDP(from: Self.client, to: Self.server, payload: TestPacket.channelData(0x4001, [1, 2]))
        let fromNew = TestPacket.ipv4UDP(from: Self.movedClient, to: Self.server, payload: TestPacket.channelData(0x4001, [3, 4]))
        routes.install(old)
        #expect(try Self.run(routes.fastPath, fromOld).packet != fromOld)
        // The core's order after a move: routes go in first, the old route's removal comes later.
        routes.install(moved)
        #expect(routes.remove(old) == .init())
        #expect(try Self.run(routes.fastPath, fromOld).packet == fromOld, "the old 5-tuple is no longer relayed")
        #expect(try Self.run(routes.fastPath, fromNew).packet != fromNew, "the new one is")
        // What the old route relayed is reported at the next collection, with the new route's.
        let collected = routes.collect().reduce(TrafficCounters()) { $0 + $1.1 }
        #expect(collected.packetsToPeer == 2)
        #expect(routes.remove(moved).packetsToPeer == 0)
    }
}
