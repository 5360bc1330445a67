import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The inline sizes an idle allocation pays for in its object and in every index keyed by an
/// address (docs/benchmark.md, "Node capacity"): a change that grows them shows here first.
@Suite struct CoreLayoutTests {
    @Test("An IP address is 17 bytes, a transport address fits in 24 and a 5-tuple in 48")
    func addressSizes() {
        #expect(MemoryLayout<IPAddress>.size == 17)
        #expect(MemoryLayout<TransportAddress>.stride == 24)
        #expect(MemoryLayout<FiveTuple>.stride == 48)
        #expect(MemoryLayout<RelayEndpoint>.stride == 56)
    }

    @Test("A new allocation reserves no storage for permissions or channels, and has no second address or carried traffic")
    func outOfLineFields() throws {
        let harness = CoreHarness()
        #expect(try harness.restClient(at: CoreFixture.clientA).allocate().isSuccess)
        let allocation = try #require(harness.allocation(of: CoreFixture.clientA))
        #expect(allocation.additional == nil)
        #expect(allocation.carried == TrafficCounters())
        #expect(allocation.permissions.capacity == 0 && allocation.channels.capacity == 0)
    }
}
