import CLibevent
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport
@testable import Relay

/// The cluster's admission ledger without Redis (docs/cluster.md): when it asks Redis and when
/// the node decides alone, how each of Redis's answers becomes a decision for the loop that
/// holds the Allocate, and what this node's share in Redis is told.
@Suite struct ClusterAdmissionLedgerTests {
    static let otherNode = ClusterAdmissionLedger.Alternate(
        name: "b", addresses: [.literal("198.51.100.7:3478"), .literal("[2001:db8::7]:3478")], tlsPort: 5349)

    /// A ledger whose decisions are recorded, and a main-loop wake-up event that is never run.
    final class Fixture {
        let base = event_base_new()!
        let event: OpaquePointer
        let local: LocalAdmissionLedger
        let ledger: ClusterAdmissionLedger
        let log = DecisionLog()

        init(userQuota: Int = 2, totalQuota: Int = 0, clusterTotalQuota: Int = 0, redisUp: Bool = true) {
            event = event_new(base, -1, 0, { _, _, _ in }, nil)!
            local = LocalAdmissionLedger(limits: .init(userQuota: userQuota, totalQuota: totalQuota))
            let log = log
            ledger = ClusterAdmissionLedger(local: local, clusterTotalQuota: clusterTotalQuota) { _, decision in
                log.decisions.withLock { $0.append(decision) }
            }
            ledger.update(redisUp: redisUp)
            ledger.update(alternates: [ClusterAdmissionLedgerTests.otherNode])
            ledger.attach(event)
        }

        deinit {
            event_free(event)
            event_base_free(base)
        }

        var decisions: [AdmissionDecision] { log.decisions.withLock { $0 } }
    }

    /// The decisions the ledger delivered, in order.
    final class DecisionLog: Sendable {
        let decisions = Locked([AdmissionDecision]())
    }

    private func ask(_ user: String, serial: UInt64 = 1, transport: TransportProtocol = .udp) -> AdmissionRequest {
        AdmissionRequest(
            user: user, bytesPerSecond: 0, family: .ipv4, transport: transport, wallTime: 1_000,
            ticket: AdmissionTicket(loop: LoopIndex(1), serial: serial))
    }

    @Test("Under a quota counted across nodes, with Redis up, an Allocate is queued and answered pending")
    func queued() {
        let f = Fixture()
        #expect(f.ledger.admit(ask("alice")) == .pending(AdmissionTicket(loop: LoopIndex(1), serial: 1)))
        #expect(f.ledger.takeQueued().map(\.user) == ["alice"])
        #expect(f.local.total == 0, "nothing is counted before Redis answers")
    }

    @Test("No round trip when Redis is down, when no quota counts across nodes, or when this node alone holds the user's quota")
    func noRoundTrip() {
        var f = Fixture(redisUp: false)
        guard case .granted = f.ledger.admit(ask("alice")) else { Issue.record("not granted"); return }
        f = Fixture(userQuota: 0)
        guard case .granted = f.ledger.admit(ask("alice")) else { Issue.record("not granted"); return }
        f = Fixture(userQuota: 1)
        f.ledger.settle(ask("alice"), redisAnswer: 0)
        #expect(f.ledger.admit(ask("alice", serial: 2)) == .refused(.init(.userQuota)))
        #expect(f.ledger.takeQueued().isEmpty)
        // A blocked user is refused before Redis is asked.
        f.local.blocklist.block("mallory", until: 2_000)
        #expect(f.ledger.admit(ask("mallory")) == .refused(.init(.blocked)))
    }

    @Test("Redis's answers: granted is counted once, 1 is 486, 2 is 508 without a redirect, none decides locally")
    func settled() throws {
        let f = Fixture()
        f.ledger.settle(ask("alice"), redisAnswer: 0)
        f.ledger.settle(ask("alice", serial: 2), redisAnswer: 1)
        f.ledger.settle(ask("alice", serial: 3), redisAnswer: 2)
        f.ledger.settle(ask("bob", serial: 4), redisAnswer: nil)
        let decisions = f.decisions
        #expect(decisions.count == 4)
        #expect(decisions[0] == .granted(AdmissionLease(user: "alice", bytesPerSecond: 0)))
        #expect(decisions[1] == .refused(.init(.userQuota)))
        #expect(decisions[2] == .refused(.init(.clusterQuota)))
        #expect(decisions[3] == .granted(AdmissionLease(user: "bob", bytesPerSecond: 0)))
        // Redis counted alice's grant already; bob's local decision is a delta to tell it.
        #expect(f.local.takeDeltas().perUser == ["bob": 1])
        let counters = f.ledger.counters
        #expect(counters.granted == 1 && counters.refused == 2 && counters.local == 1)
    }

    @Test("Granted by Redis but over this node's total-quota: refused with a redirect, and Redis's count goes back")
    func fullAfterGrant() {
        let f = Fixture(totalQuota: 1)
        f.ledger.settle(ask("a"), redisAnswer: 0)
        f.ledger.settle(ask("b", serial: 2), redisAnswer: 0)
        #expect(f.decisions.last == .refused(.init(.totalQuota, redirect: .literal("198.51.100.7:3478"))))
        #expect(f.local.takeDeltas().perUser == ["b": -1])
    }

    @Test("Detaching decides what is queued on the node's own counts, and later Allocates at once")
    func detach() {
        let f = Fixture()
        _ = f.ledger.admit(ask("alice"))
        f.ledger.detach()
        #expect(f.decisions == [.granted(AdmissionLease(user: "alice", bytesPerSecond: 0))])
        guard case .granted = f.ledger.admit(ask("alice", serial: 2)) else { Issue.record("not granted"); return }
        #expect(f.ledger.takeQueued().isEmpty)
    }

    @Test("The least loaded other node of the client's family; its TLS port for TLS; none alone")
    func alternates() {
        let f = Fixture()
        #expect(f.ledger.alternate(family: .ipv6, transport: .udp) == .literal("[2001:db8::7]:3478"))
        #expect(f.ledger.alternate(family: .ipv4, transport: .tls) == .literal("198.51.100.7:5349"))
        f.ledger.update(alternates: [])
        #expect(f.ledger.alternate(family: .ipv4, transport: .udp) == nil)
    }
}
