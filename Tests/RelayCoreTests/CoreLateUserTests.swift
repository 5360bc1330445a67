import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// A user the user database's in-memory view lacks (docs/userdb.md): the Allocate is held, the
/// user looked up off the loop, and the request handled again when the answer comes.
@Suite struct CoreLateUserTests {
    static func harness() -> CoreHarness {
        CoreHarness(options: CoreFixture.options { $0.settings.lookUpUnknownUsers = true })
    }

    @Test("An Allocate of a user the view lacks waits for the lookup, then succeeds with the key found")
    func foundLater() throws {
        let harness = Self.harness()
        let late = harness.client(at: CoreFixture.clientA, username: "late", password: "late-password")
        #expect(throws: TurnTestClient.NoAnswer.self) { try late.allocate() }
        #expect(harness.userLookups.map(\.name) == ["late"])
        #expect(harness.userLookups.first?.realm == CoreFixture.realm)
        // A retransmission while the lookup runs waits with it: no second lookup.
        #expect(try late.send(try late.signedRequest(.allocate) { try $0.append(RequestedTransport.udp) }) == nil)
        #expect(harness.userLookups.count == 1)
        let key = KeyDerivation.longTermKeyMD5(username: "late", realm: CoreFixture.realm, password: "late-password")
        harness.core.userLookedUp(try #require(harness.userLookups.first), md5: key, now: harness.now)
        let answers = harness.drainOutbox().filter { $0.client == CoreFixture.clientA }
        // The first is answered; its copy finds the Allocate under way and is dropped, as any
        // retransmission then is.
        #expect(answers.count == 1)
        #expect(try answers.allSatisfy { try ReceivedStun($0.bytes).isSuccess })
        #expect(harness.core.allocationRecords(.all, now: harness.now).map(\.user) == ["late"])
        #expect(harness.counters.userLookupsHeld == 2)
    }

    @Test("A user the database does not have either gets its 401, and is not asked for again at once")
    func missing() throws {
        let harness = Self.harness()
        let ghost = harness.client(at: CoreFixture.clientA, username: "ghost", password: "x")
        #expect(throws: TurnTestClient.NoAnswer.self) { try ghost.allocate() }
        harness.core.userLookedUp(try #require(harness.userLookups.first), md5: nil, now: harness.now)
        let answers = harness.drainOutbox().filter { $0.client == CoreFixture.clientA }
        #expect(try answers.map { try ReceivedStun($0.bytes).errorCode } == [401])
        #expect(try ghost.allocate().errorCode == 401)
        #expect(harness.userLookups.count == 1)
    }

    @Test("Without a user database, REST names, and other methods are never held")
    func notHeld() throws {
        let plain = CoreHarness()
        #expect(try plain.client(at: CoreFixture.clientA, username: "late", password: "x").allocate().errorCode == 401)
        #expect(plain.userLookups.isEmpty)
        let harness = Self.harness()
        let rest = harness.client(at: CoreFixture.clientA, username: "1700090000:nobody", password: "x")
        #expect(try rest.allocate().errorCode == 401)
        let refresh = harness.client(at: CoreFixture.clientB, username: "late", password: "x")
        #expect(try refresh.refresh().errorCode == 437 || refresh.nonce != nil)
        #expect(harness.userLookups.isEmpty)
    }
}

@Suite struct CoreLateUserStreamTests {
    @Test("A held Allocate of a stream connection that closed is forgotten: nothing is allocated for it")
    func closedConnection() throws {
        let harness = CoreHarness(options: CoreFixture.options { $0.settings.lookUpUnknownUsers = true })
        let late = harness.client(at: CoreFixture.clientA, username: "late", password: "pw", transport: .tcp)
        #expect(throws: TurnTestClient.NoAnswer.self) { try late.allocate() }
        #expect(!harness.core.streamClientCanMove(harness.origin(CoreFixture.clientA, transport: .tcp).fiveTuple))
        harness.core.connectionClosed(harness.origin(CoreFixture.clientA, transport: .tcp), now: harness.now)
        let key = KeyDerivation.longTermKeyMD5(username: "late", realm: CoreFixture.realm, password: "pw")
        harness.core.userLookedUp(try #require(harness.userLookups.first), md5: key, now: harness.now)
        #expect(harness.drainOutbox().isEmpty)
        #expect(harness.core.allocationRecords(.all, now: harness.now).isEmpty)
    }

    @Test("A SHA-256 Allocate is not held: a database holds MD5 keys only")
    func sha256NotHeld() throws {
        let harness = CoreHarness(options: CoreFixture.options { $0.settings.lookUpUnknownUsers = true })
        let late = harness.client(at: CoreFixture.clientA, username: "late", password: "pw")
        _ = try late.challenge()
        late.algorithm = .sha256
        #expect(try late.allocate().errorCode == 401)
        #expect(harness.userLookups.isEmpty)
    }
}
