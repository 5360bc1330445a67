import RelayCore
import StunCodec
import Testing

/// The node's admission ledger on its own (docs/architecture.md, "Admission"): what it grants,
/// what it refuses and why, and that releasing a lease gives back exactly what it took.
@Suite struct AdmissionLedgerTests {
    private func ask(_ user: String, bps: Int = 0, at wallTime: Int64 = 1_000) -> AdmissionRequest {
        AdmissionRequest(
            user: user, bytesPerSecond: bps, family: .ipv4, transport: .udp, wallTime: wallTime,
            ticket: AdmissionTicket(loop: LoopIndex(0), serial: 1))
    }

    private func lease(_ decision: AdmissionDecision) -> AdmissionLease? { decision.grantedLease }

    private func reason(_ decision: AdmissionDecision) -> AdmissionRefusal.Reason? { decision.refusalReason }

    @Test("bps-capacity grants max-bps while it lasts, then what is left, then nothing; releases make room")
    func capacityReservations() throws {
        let ledger = LocalAdmissionLedger(limits: .init(bpsCapacity: 2500))
        let first = try #require(lease(ledger.admit(ask("a", bps: 1000))))
        #expect(first.bytesPerSecond == 1000)
        #expect(lease(ledger.admit(ask("b", bps: 1000)))?.bytesPerSecond == 1000)
        #expect(lease(ledger.admit(ask("c", bps: 1000)))?.bytesPerSecond == 500)
        #expect(reason(ledger.admit(ask("d", bps: 1000))) == .bandwidth)
        // The refusal took nothing: three allocations, 2500 reserved.
        #expect(ledger.total == 3 && ledger.reservedBytesPerSecond == 2500)
        ledger.release(first)
        #expect(ledger.reservedBytesPerSecond == 1500 && ledger.total == 2 && ledger.count(user: "a") == 0)
        #expect(lease(ledger.admit(ask("e", bps: 1000)))?.bytesPerSecond == 1000)
        // A lower capacity after a reload refuses new reservations; live ones keep theirs.
        ledger.update(limits: .init(bpsCapacity: 1000))
        #expect(reason(ledger.admit(ask("f", bps: 1))) == .bandwidth)
        #expect(ledger.reservedBytesPerSecond == 2500)
        // 0 is unlimited; an Allocate without max-bps reserves nothing.
        ledger.update(limits: .init())
        #expect(lease(ledger.admit(ask("g", bps: 1_000_000)))?.bytesPerSecond == 1_000_000)
        #expect(lease(ledger.admit(ask("h")))?.bytesPerSecond == 0)
    }

    @Test("Quotas: user-quota refuses with 486, total-quota with 508 and a redirect allowed; blocks with 403")
    func refusals() throws {
        let ledger = LocalAdmissionLedger(limits: .init(userQuota: 1, totalQuota: 2))
        let alice = try #require(lease(ledger.admit(ask("alice"))))
        guard case .refused(let userQuota) = ledger.admit(ask("alice")) else { Issue.record("granted"); return }
        #expect(userQuota.reason == .userQuota && userQuota.error == .allocationQuotaReached && !userQuota.redirectable)
        #expect(lease(ledger.admit(ask("bob"))) != nil)
        guard case .refused(let total) = ledger.admit(ask("carol")) else { Issue.record("granted"); return }
        #expect(total.reason == .totalQuota && total.error == .insufficientCapacity && total.redirectable)
        ledger.release(alice)
        #expect(lease(ledger.admit(ask("carol"))) != nil)
        // A block refuses until it lapses, whatever the counts.
        ledger.blocklist.block("dave", until: 2_000)
        ledger.update(limits: .init())
        guard case .refused(let blocked) = ledger.admit(ask("dave", at: 1_999)) else { Issue.record("granted"); return }
        #expect(blocked.reason == .blocked && blocked.error == .forbidden)
        #expect(lease(ledger.admit(ask("dave", at: 2_000))) != nil)
        #expect(ledger.alternate(family: .ipv4, transport: .udp) == nil)
    }

    @Test("Mirroring: grants and releases become deltas; a grant the cluster counted adds none, its refusal hands one back")
    func mirroring() throws {
        let ledger = LocalAdmissionLedger(limits: .init(userQuota: 1, totalQuota: 1))
        let before = try #require(lease(ledger.admit(ask("old"))))
        ledger.startMirroring()
        // The share written anew holds what was counted before mirroring began.
        #expect(ledger.snapshotForMirror().total == 1)
        ledger.release(before)
        #expect(ledger.takeDeltas().perUser == ["old": -1])
        // Counted by Redis: no delta; over user-quota on this node alone it is still granted
        // (the cluster decided user-quota), but total-quota applies.
        let counted = try #require(lease(ledger.admitCounted(ask("alice"))))
        #expect(ledger.takeDeltas().isEmpty)
        #expect(reason(ledger.admitCounted(ask("bob"))) == .totalQuota)
        #expect(ledger.takeDeltas().perUser == ["bob": -1])
        ledger.release(counted)
        #expect(ledger.takeDeltas().perUser == ["alice": -1])
        #expect(ledger.total == 0 && ledger.takeDeltas().isEmpty)
    }
}
