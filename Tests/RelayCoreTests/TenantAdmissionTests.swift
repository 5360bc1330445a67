import RelayCore
import StunCodec
import Testing

/// Tenants in the node's admission ledger (docs/tenants.md): their own caps, their reservations
/// of allocations and bandwidth, and counts that come back exactly on release.
@Suite struct TenantAdmissionTests {
    private func ask(_ user: String, tenant: String, bps: Int = 0) -> AdmissionRequest {
        AdmissionRequest(
            user: tenant.isEmpty ? user : tenant + "/" + user, bytesPerSecond: bps, family: .ipv4, transport: .udp,
            wallTime: 1_000, ticket: AdmissionTicket(loop: LoopIndex(0), serial: 1), tenant: tenant)
    }

    private func lease(_ decision: AdmissionDecision) -> AdmissionLease? { decision.grantedLease }

    private func reason(_ decision: AdmissionDecision) -> AdmissionRefusal.Reason? { decision.refusalReason }

    @Test("reserve-bps holds bps-capacity back from other tenants until the reserving tenant uses it")
    func bandwidthReservation() throws {
        let ledger = LocalAdmissionLedger(
            limits: .init(bpsCapacity: 3000, tenants: ["sos": TenantLimits(reservedBPS: 1000)]))
        #expect(lease(ledger.admit(ask("a", tenant: "", bps: 1500)))?.bytesPerSecond == 1500)
        // 3000 less sos's unused 1000: 500 left for the others.
        #expect(lease(ledger.admit(ask("b", tenant: "chat", bps: 1500)))?.bytesPerSecond == 500)
        #expect(reason(ledger.admit(ask("c", tenant: "chat", bps: 1500))) == .bandwidth)
        // sos gets its reservation on a node the others filled.
        let sos = try #require(lease(ledger.admit(ask("d", tenant: "sos", bps: 1500))))
        #expect(sos.bytesPerSecond == 1000)
        #expect(ledger.reservedBytesPerSecond == 3000)
        ledger.release(sos)
        #expect(ledger.reservedBytesPerSecond == 2000)
        #expect(reason(ledger.admit(ask("e", tenant: "", bps: 1))) == .bandwidth)
    }

    @Test("A tenant's own bps-capacity caps it; the counts return exactly on release")
    func tenantBandwidthCap() throws {
        let ledger = LocalAdmissionLedger(limits: .init(tenants: ["kit": TenantLimits(bpsCapacity: 800)]))
        let first = try #require(lease(ledger.admit(ask("a", tenant: "kit", bps: 500))))
        #expect(lease(ledger.admit(ask("b", tenant: "kit", bps: 500)))?.bytesPerSecond == 300)
        #expect(reason(ledger.admit(ask("c", tenant: "kit", bps: 500))) == .bandwidth)
        #expect(lease(ledger.admit(ask("d", tenant: "", bps: 500)))?.bytesPerSecond == 500)
        ledger.release(first)
        #expect(lease(ledger.admit(ask("e", tenant: "kit", bps: 500)))?.bytesPerSecond == 500)
        #expect(ledger.tenantCounts["kit"]?.live == 2 && ledger.tenantCounts["kit"]?.granted == 3)
        #expect(ledger.tenantCounts[""]?.live == 1)
    }

    @Test("A readmitted lease counts against its tenant again (a live upgrade, a restore)")
    func readmit() {
        let ledger = LocalAdmissionLedger(limits: .init(totalQuota: 2, tenants: ["sos": TenantLimits(reservedAllocations: 1)]))
        let adopted = ledger.readmit(AdmissionLease(user: "sos/x", bytesPerSecond: 0, tenant: "sos"))
        #expect(ledger.tenantCounts["sos"]?.live == 1)
        // sos's reservation is used: the other tenants get the rest of the node.
        #expect(lease(ledger.admit(ask("y", tenant: ""))) != nil)
        #expect(reason(ledger.admit(ask("z", tenant: ""))) == .totalQuota)
        ledger.release(adopted)
        #expect((ledger.tenantCounts["sos"]?.live ?? 0) == 0)
    }
}
