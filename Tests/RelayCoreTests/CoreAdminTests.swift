import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// What the admin API asks of a core (docs/admin.md): list its allocations, end them now, and
/// refuse a blocked user's Allocate with 403 (RFC 8656 §7.2).
@Suite struct CoreAdminTests {
    @Test("Records carry user, 5-tuple, relayed address, permissions, channels and traffic; a selector filters")
    func records() throws {
        let harness = CoreHarness()
        let alice = harness.restClient(at: CoreFixture.clientA, user: "alice")
        let bob = harness.restClient(at: CoreFixture.clientB, user: "bob")
        let relayed = try #require(try alice.allocate().xorRelayedAddress)
        #expect(try bob.allocate().isSuccess)
        #expect(try alice.channelBind(0x4000, to: CoreFixture.peer1).isSuccess)
        harness.advance(by: 10)

        let all = harness.core.allocationRecords(.all, now: harness.now)
        #expect(all.count == 2)
        let record = try #require(harness.core.allocationRecords(.user("alice"), now: harness.now).first)
        #expect(record.user == "alice")
        #expect(record.fiveTuple.client == CoreFixture.clientA && record.fiveTuple.transport == .udp)
        #expect(record.relayed == [relayed])
        #expect(record.ageSeconds == 10 && record.remainingSeconds == 590)
        #expect(record.permissions.map(\.peer) == [CoreFixture.peer1.ip])
        #expect(record.channels.map(\.number) == [0x4000] && record.channels.map(\.peer) == [CoreFixture.peer1])
        #expect(record.session.count == 16)
        #expect(harness.core.allocationRecords(.session(record.session), now: harness.now).map(\.user) == ["alice"])
        #expect(harness.core.allocationRecords(.session("0000000000000000"), now: harness.now).isEmpty)
        #expect(harness.core.allocationRecords(.user("carol"), now: harness.now).isEmpty)
    }

    @Test("A page holds at most `limit` allocations after the cursor, in session order, with the counts")
    func pages() throws {
        let harness = CoreHarness()
        for port in 40001...40005 {
            #expect(try harness.restClient(at: .literal("192.0.2.1:\(port)"), user: "alice").allocate().isSuccess)
        }
        #expect(try harness.restClient(at: .literal("192.0.2.9:40001"), user: "bob").allocate().isSuccess)
        let all = harness.core.allocationRecords(.user("alice"), now: harness.now).map(\.session).sorted()
        let first = harness.core.allocationPage(.user("alice"), after: nil, limit: 2, now: harness.now)
        #expect(first.records.map(\.session) == Array(all.prefix(2)) && first.matching == 5 && first.remaining == 5)
        let next = harness.core.allocationPage(.user("alice"), after: all[1], limit: 2, now: harness.now)
        #expect(next.records.map(\.session) == Array(all[2..<4]) && next.matching == 5 && next.remaining == 3)
        let last = harness.core.allocationPage(.user("alice"), after: all[4], limit: 2, now: harness.now)
        #expect(last.records.isEmpty && last.remaining == 0)
    }

    @Test("Terminating a user's allocations frees sockets and quota; their Refresh gets 437, others go on")
    func terminate() throws {
        let harness = CoreHarness()
        let alice = harness.restClient(at: CoreFixture.clientA, user: "alice")
        let bob = harness.restClient(at: CoreFixture.clientB, user: "bob")
        #expect(try alice.allocate().isSuccess)
        #expect(try bob.allocate().isSuccess)

        #expect(harness.core.terminateAllocations(.user("alice"), now: harness.now) == 1)
        #expect(harness.core.terminateAllocations(.user("alice"), now: harness.now) == 0)
        _ = harness.drainOutbox()
        #expect(harness.sockets.closed.count == 1)
        #expect(harness.admission.total == 1)
        #expect(harness.counters.allocationsTerminated == 1 && harness.counters.allocationsDeleted == 1)
        #expect(try alice.refresh().errorCode == 437)
        #expect(try bob.refresh().isSuccess)
    }

    @Test("A blocked user's Allocate gets 403 until the block lapses; other users allocate")
    func blockedUser() throws {
        let harness = CoreHarness()
        harness.admission.blocklist.block("alice", until: harness.now + 60)
        let alice = harness.restClient(at: CoreFixture.clientA, user: "alice")
        #expect(try alice.allocate().errorCode == 403)
        #expect(harness.counters.allocatesOfBlockedUsers == 1)
        #expect(try harness.restClient(at: CoreFixture.clientB, user: "bob").allocate().isSuccess)
        harness.advance(by: 60)
        #expect(try alice.allocate().isSuccess)
        #expect(harness.admission.blocklist.list(now: harness.now).isEmpty)
    }

    @Test("The blocklist replaces, lifts, lapses and stays bounded")
    func blocklist() {
        let list = UserBlocklist()
        #expect(!list.isBlocked("a", now: 0))
        #expect(list.block("a", until: 100))
        #expect(list.block("a", until: 200))
        #expect(list.isBlocked("a", now: 150))
        #expect(list.list(now: 0) == [.init(user: "a", until: 200)])
        #expect(list.unblock("a") && !list.unblock("a"))
        #expect(list.block("b", until: 10))
        #expect(!list.isBlocked("b", now: 10))
        #expect(list.list(now: 0).isEmpty)
        for i in 0..<UserBlocklist.limit { list.block("u\(i)", until: 100) }
        #expect(!list.block("one-more", until: 100))
        #expect(list.block("u7", until: 200))
        #expect(list.list(now: 0).count == UserBlocklist.limit)
    }
}
