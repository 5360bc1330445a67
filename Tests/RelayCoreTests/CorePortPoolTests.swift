import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The node's relay ports are one pool that every loop takes from (RFC 8656 §7.2): a 508 means no
/// port of the family is free on the node, whichever loop the client hashed to.
@Suite struct CorePortPoolTests {
    /// Two loops of one node sharing admission, directory and ports.
    static func twoLoops(_ options: CoreFixture.Options) -> (CoreHarness, CoreHarness) {
        let admission = LocalAdmissionLedger()
        let directory = RelayedAddressDirectory()
        let ports = CoreFixture.portPool(options)
        let reservations = ReservationTable()
        func loop(_ index: Int) -> CoreHarness {
            CoreHarness(
                options: options,
                loop: .init(
                    index: index, count: 2, admission: admission, directory: directory, ports: ports,
                    reservations: reservations))
        }
        return (loop(0), loop(1))
    }

    static func client(_ i: Int) -> TransportAddress { .literal("192.0.2.\(i + 1):40000") }

    @Test("Every port of the range goes to clients of one loop; the next Allocate gets 508")
    func oneLoopTakesTheWholeRange() throws {
        let options = CoreFixture.options {
            $0.settings.minPort = 50000
            $0.settings.maxPort = 50009
        }
        let (first, second) = Self.twoLoops(options)
        var relayed: Set<UInt16> = []
        for i in 0..<10 {
            let response = try first.restClient(at: Self.client(i)).allocate()
            relayed.insert(try #require(response.xorRelayedAddress?.port))
        }
        #expect(relayed == Set(50000...50009))
        #expect(try first.restClient(at: Self.client(10)).allocate().errorCode == 508)
        // The other loop finds none free either, and both read the node's figures.
        #expect(try second.restClient(at: Self.client(11)).allocate().errorCode == 508)
        #expect(first.core.relayPortsFree == 0 && second.core.relayPortsFree == 0)
        #expect(second.core.relayPortsInUse == 10)
    }

    @Test("A port freed on one loop is handed out by the other")
    func freedPortCrossesLoops() throws {
        let options = CoreFixture.options {
            $0.settings.minPort = 50000
            $0.settings.maxPort = 50001
        }
        let (first, second) = Self.twoLoops(options)
        let a = first.restClient(at: Self.client(0))
        let port = try #require(try a.allocate().xorRelayedAddress?.port)
        #expect(try first.restClient(at: Self.client(1)).allocate().isSuccess)
        #expect(try second.restClient(at: Self.client(2)).allocate().errorCode == 508)
        #expect(try a.refresh(lifetime: 0).isSuccess)
        #expect(try second.restClient(at: Self.client(2)).allocate().xorRelayedAddress?.port == port)
    }

    @Test("Out of descriptors: 508 after one failed open, not one per port; relay ports stay free")
    func outOfDescriptorsFailsFast() throws {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.settings.minPort = 50000
                $0.settings.maxPort = 59999
            })
        harness.sockets.outOfDescriptors = true
        #expect(try harness.restClient(at: Self.client(0)).allocate().errorCode == 508)
        #expect(try harness.restClient(at: Self.client(1)).allocate().errorCode == 508)
        #expect(harness.sockets.exhaustedAttempts == 2)
        #expect(harness.core.relayPortsInUse == 0)
        #expect(harness.admission.total == 0)
        harness.sockets.outOfDescriptors = false
        #expect(try harness.restClient(at: Self.client(2)).allocate().isSuccess)
    }

    @Test("A token taken on another loop: the reserving loop's sweep leaves the port held; the allocation's end frees it")
    func reservationTakenOnAnotherLoop() throws {
        let options = CoreFixture.options {
            $0.settings.minPort = 50002
            $0.settings.maxPort = 50003
        }
        let (first, second) = Self.twoLoops(options)
        let reserving = try first.restClient(at: Self.client(0)).allocate { w in
            try w.append(EvenPort(reservePair: true))
        }
        let token = try #require(reserving.reservationToken)
        let taker = second.restClient(at: Self.client(1))
        let taken = try taker.allocate { w in try w.append(ReservationToken(value: token)) }
        #expect(taken.xorRelayedAddress?.port == 50003)
        // Past the reservation's 30 s the reserving loop sweeps: the port is an allocation's now.
        first.advance(by: 31)
        first.sweep()
        #expect(first.core.relayPortsInUse == 2)
        second.advance(by: 31)
        #expect(try taker.refresh(lifetime: 0).isSuccess)
        #expect(first.core.relayPortsInUse == 1)
        #expect(try first.restClient(at: Self.client(2)).allocate().xorRelayedAddress?.port == 50003)
    }
}
