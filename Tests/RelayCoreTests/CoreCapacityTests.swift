import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Quotas, relay ports and EVEN-PORT reservations (RFC 8656 §7.2, §18.7, §18.10).
@Suite struct CoreCapacityTests {
    @Test("With user-quota 1 a user's second allocation gets 486; another user still allocates")
    func userQuota() throws {
        let harness = CoreHarness(options: CoreFixture.options { $0.userQuota = 1 })
        #expect(try harness.restClient(at: CoreFixture.clientA, user: "alice").allocate().isSuccess)
        // Another REST username of the same user (other expiry) counts against the same quota.
        let second = try harness.restClient(at: CoreFixture.clientB, user: "alice", validFor: 3600).allocate()
        #expect(second.errorCode == 486)
        #expect(harness.sockets.opens == 1)
        #expect(try harness.restClient(at: .literal("192.0.2.3:40003"), user: "carol").allocate().isSuccess)
        #expect(harness.counters.errors(.allocationQuotaReached) == 1)
    }

    @Test("With total-quota reached a new allocation gets 508; a delete makes room")
    func totalQuota() throws {
        let harness = CoreHarness(options: CoreFixture.options { $0.totalQuota = 1 })
        let first = harness.restClient(at: CoreFixture.clientA, user: "alice")
        #expect(try first.allocate().isSuccess)
        let second = harness.restClient(at: CoreFixture.clientB, user: "carol")
        #expect(try second.allocate().errorCode == 508)
        #expect(try first.refresh(lifetime: 0).isSuccess)
        #expect(try second.allocate().isSuccess)
    }

    @Test("When every relay port is taken Allocate gets 508; after a delete the port is handed out again")
    func portExhaustion() throws {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.settings.minPort = 50001
                $0.settings.maxPort = 50001
            })
        let first = harness.restClient(at: CoreFixture.clientA)
        #expect(try first.allocate().xorRelayedAddress?.port == 50001)
        let second = harness.restClient(at: CoreFixture.clientB)
        #expect(try second.allocate().errorCode == 508)
        #expect(harness.admission.total == 1)
        #expect(harness.core.relayPortsFree == 0)

        #expect(try first.refresh(lifetime: 0).isSuccess)
        #expect(try second.allocate().xorRelayedAddress?.port == 50001)
    }

    @Test("Ports another process holds (EADDRINUSE) are skipped; when none is left Allocate gets 508")
    func portsInUseElsewhere() throws {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.settings.minPort = 50000
                $0.settings.maxPort = 50002
            })
        harness.sockets.refusedPorts = [50000, 50002]
        #expect(try harness.restClient(at: CoreFixture.clientA).allocate().xorRelayedAddress?.port == 50001)
        #expect(try harness.restClient(at: CoreFixture.clientB).allocate().errorCode == 508)
        #expect(harness.sockets.refusals >= 2)
        #expect(harness.admission.total == 1)

        // Known to be another socket's for a minute: no port is tried, 508 at once.
        harness.sockets.refusedPorts = []
        let refusals = harness.sockets.refusals
        #expect(try harness.restClient(at: .literal("192.0.2.3:40003")).allocate().errorCode == 508)
        #expect(harness.sockets.refusals == refusals)
        harness.advance(by: RelayPortPool.foreignPortSeconds)
        harness.sweep()
        let third = try harness.restClient(at: .literal("192.0.2.4:40004")).allocate()
        #expect(third.isSuccess)
        #expect(third.xorRelayedAddress?.port != 50001)
    }

    @Test("EVEN-PORT gets an even relayed port (RFC 8656 §7.2)")
    func evenPort() throws {
        for round in 0..<5 {
            let harness = CoreHarness()
            let client = harness.restClient(at: .literal("192.0.2.\(round + 1):40000"))
            let response = try client.allocate { w in try w.append(EvenPort(reservePair: false)) }
            let port = try #require(response.xorRelayedAddress?.port)
            #expect(port % 2 == 0)
            #expect(response.reservationToken == nil)
        }
    }

    @Test("A reserved port another socket took meanwhile: the token's Allocate gets 508 and the port is counted foreign, not held")
    func reservedPortTakenElsewhere() throws {
        let harness = CoreHarness()
        let first = try harness.restClient(at: CoreFixture.clientA).allocate { w in
            try w.append(EvenPort(reservePair: true))
        }
        let port = try #require(first.xorRelayedAddress?.port)
        let token = try #require(first.reservationToken)
        #expect(harness.core.relayPortsInUse == 2)
        harness.sockets.refusedPorts = [port + 1]
        let second = try harness.restClient(at: CoreFixture.clientB).allocate { w in
            try w.append(ReservationToken(value: token))
        }
        #expect(second.errorCode == 508)
        #expect(harness.core.relayPortsInUse == 1)
        #expect(harness.core.relayPortsForeign == 1)
        let counted = harness.core.tables.ports.recount()
        #expect(counted.held == 1 && counted.foreign == 1)
    }

    @Test(
        "EVEN-PORT with the R bit returns a RESERVATION-TOKEN; an Allocate with that token gets port + 1 (RFC 8656 §7.2)"
    )
    func reservationToken() throws {
        let harness = CoreHarness()
        let first = try harness.restClient(at: CoreFixture.clientA).allocate { w in
            try w.append(EvenPort(reservePair: true))
        }
        let port = try #require(first.xorRelayedAddress?.port)
        #expect(port % 2 == 0)
        let token = try #require(first.reservationToken)
        #expect(harness.core.relayPortsInUse == 2)

        let second = try harness.restClient(at: CoreFixture.clientB).allocate { w in
            try w.append(ReservationToken(value: token))
        }
        #expect(second.xorRelayedAddress?.port == port + 1)
        #expect(harness.core.relayPortsInUse == 2)

        // A token is good once.
        let third = try harness.restClient(at: .literal("192.0.2.3:40003")).allocate { w in
            try w.append(ReservationToken(value: token))
        }
        #expect(third.errorCode == 508)
    }

    @Test("RESERVATION-TOKEN together with EVEN-PORT gets 400 (RFC 8656 §7.2)")
    func tokenWithEvenPort() throws {
        let harness = CoreHarness()
        let response = try harness.restClient(at: CoreFixture.clientA).allocate { w in
            try w.append(EvenPort(reservePair: false))
            try w.append(ReservationToken(value: 42))
        }
        #expect(response.errorCode == 400)
    }

    @Test("An unknown RESERVATION-TOKEN gets 508 and releases the quota it took")
    func unknownToken() throws {
        let harness = CoreHarness()
        let response = try harness.restClient(at: CoreFixture.clientA).allocate { w in
            try w.append(ReservationToken(value: 42))
        }
        #expect(response.errorCode == 508)
        #expect(harness.admission.total == 0)
    }

    @Test("An unused reservation is released after 30 s by sweep")
    func reservationExpiresOnSweep() throws {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.settings.minPort = 50002
                $0.settings.maxPort = 50003
            })
        let first = try harness.restClient(at: CoreFixture.clientA).allocate { w in
            try w.append(EvenPort(reservePair: true))
        }
        #expect(first.xorRelayedAddress?.port == 50002)
        #expect(try harness.restClient(at: CoreFixture.clientB).allocate().errorCode == 508)
        harness.advance(by: 30)
        harness.sweep()
        #expect(try harness.restClient(at: CoreFixture.clientB).allocate().xorRelayedAddress?.port == 50003)
    }

    @Test("A token used after its reservation expired (before any sweep) gets 508 and the reserved port is not lost")
    func expiredTokenReleasesPort() throws {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.settings.minPort = 50002
                $0.settings.maxPort = 50003
            })
        let first = try harness.restClient(at: CoreFixture.clientA).allocate { w in
            try w.append(EvenPort(reservePair: true))
        }
        let token = try #require(first.reservationToken)
        harness.advance(by: 30)
        let late = try harness.restClient(at: CoreFixture.clientB).allocate { w in
            try w.append(ReservationToken(value: token))
        }
        #expect(late.errorCode == 508)
        harness.sweep()
        #expect(harness.core.relayPortsInUse == 1)
        #expect(try harness.restClient(at: .literal("192.0.2.3:40003")).allocate().xorRelayedAddress?.port == 50003)
    }

    @Test("EVEN-PORT with the R bit when no even/odd pair is free gets 508")
    func noPairFree() throws {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.settings.minPort = 50001
                $0.settings.maxPort = 50002
            })
        let response = try harness.restClient(at: CoreFixture.clientA).allocate { w in
            try w.append(EvenPort(reservePair: true))
        }
        #expect(response.errorCode == 508)
        #expect(harness.admission.total == 0)
    }
}
