import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Refresh and the end of an allocation (RFC 8656 §8.2, §8.3 and §6 "expires").
@Suite struct CoreRefreshTests {
    private func onePortOptions() -> CoreFixture.Options {
        CoreFixture.options {
            $0.settings.minPort = 50004
            $0.settings.maxPort = 50004
        }
    }

    @Test("Refresh with LIFETIME 0 deletes the allocation: socket closed, port and quota free again")
    func refreshZeroDeletes() throws {
        let harness = CoreHarness(options: onePortOptions())
        let client = harness.restClient(at: CoreFixture.clientA)
        let allocated = try client.allocate()
        let relayed = try #require(allocated.xorRelayedAddress)
        #expect(relayed.port == 50004)
        let socket = try #require(harness.sockets.descriptor(boundTo: relayed))

        let deleted = try client.refresh(lifetime: 0)
        #expect(deleted.isSuccess)
        #expect(deleted.lifetime == 0)
        #expect(deleted.integrity(key: client.key) == .valid)
        #expect(harness.core.allocationCount == 0)
        #expect(harness.sockets.closed == [socket])
        #expect(harness.sockets.bound.isEmpty)
        #expect(harness.core.relayPortsInUse == 0)
        #expect(harness.admission.total == 0)
        #expect(harness.counters.allocationsDeleted == 1)

        let again = try harness.restClient(at: CoreFixture.clientB).allocate()
        #expect(again.xorRelayedAddress == relayed)
    }

    @Test("Refresh on a 5-tuple without an allocation gets 437 (RFC 8656 §8.2)")
    func refreshWithoutAllocation() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let response = try client.refresh()
        #expect(response.errorCode == 437)
        #expect(response.integrity(key: client.key) == .valid)
    }

    @Test("A deleted allocation's 5-tuple answers Refresh with 437")
    func refreshAfterDelete() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        #expect(try client.refresh(lifetime: 0).isSuccess)
        #expect(try client.refresh(lifetime: 0).errorCode == 437)
    }

    @Test(
        "Refresh grants max(600, min(requested, max-allocate-lifetime)), or 600 without LIFETIME (RFC 8656 §8.2)",
        arguments: [(nil, 600), (1, 600), (60, 600), (600, 600), (1200, 1200), (3600, 3600), (UInt32.max, 3600)]
            as [(UInt32?, UInt32)])
    func refreshLifetime(requested: UInt32?, granted: UInt32) throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        harness.advance(by: 100)
        let response = try client.refresh(lifetime: requested)
        #expect(response.lifetime == granted)
        #expect(harness.allocation(of: CoreFixture.clientA)?.expiry == harness.now + Int64(granted))
    }

    @Test("A refreshed allocation outlives its first lifetime; it expires at the new one")
    func refreshExtends() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        harness.advance(by: 500)
        #expect(try client.refresh().lifetime == 600)
        harness.advance(to: CoreFixture.start + 1099)
        harness.sweep()
        #expect(harness.core.allocationCount == 1)
        harness.advance(to: CoreFixture.start + 1100)
        harness.sweep()
        #expect(harness.core.allocationCount == 0)
    }

    @Test("Refresh with a REQUESTED-ADDRESS-FAMILY other than the allocation's gets 443 (RFC 8656 §8.2)")
    func refreshFamilyMismatch() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        let response = try client.request(.refresh) { w in try w.append(RequestedAddressFamily(family: .ipv6)) }
        #expect(response.errorCode == 443)
    }

    @Test("An allocation expires at its lifetime on sweep: socket closed, port and quota released")
    func allocationExpiry() throws {
        let harness = CoreHarness(options: onePortOptions())
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().lifetime == 600)

        harness.advance(by: 599)
        harness.sweep()
        #expect(harness.core.allocationCount == 1)
        #expect(harness.admission.total == 1)

        harness.advance(by: 1)
        harness.sweep()
        #expect(harness.core.allocationCount == 0)
        #expect(harness.sockets.closes == 1)
        #expect(harness.sockets.bound.isEmpty)
        #expect(harness.core.relayPortsInUse == 0)
        #expect(harness.admission.total == 0)
        #expect(harness.counters.allocationsExpired == 1)

        let next = try harness.restClient(at: CoreFixture.clientB).allocate()
        #expect(next.xorRelayedAddress?.port == 50004)
    }
}
