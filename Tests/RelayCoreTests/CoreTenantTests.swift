@testable import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Tenants (docs/tenants.md): how a request finds its tenant, that a credential of one tenant
/// never verifies in another, per-tenant quotas and reservations, and isolation between tenants'
/// allocations.
@Suite struct CoreTenantTests {
    static let voiceListener = TransportAddress.literal("10.0.0.6:3478")

    /// Two tenants besides the default one: `voice` (by credential on the shared address, and
    /// by its own listener address) and `chat` (by credential, and by ORIGIN).
    static func options(_ adjust: (inout CoreFixture.Options) -> Void = { _ in }) -> CoreFixture.Options {
        CoreFixture.options {
            $0.tenants = [
                .init(name: "voice", secret: "voice-secret", realm: "voice.example", listener: voiceListener.ip),
                .init(name: "chat", secret: "chat-secret", realm: "chat.example", origin: "https://chat.example"),
            ]
            adjust(&$0)
        }
    }

    @Test("On the shared address a credential finds its tenant by the secret that verifies it")
    func sharedAddressByCredential() throws {
        let harness = CoreHarness(options: Self.options())
        let voice = harness.restClient(at: CoreFixture.clientA, user: "alice", secret: "voice-secret")
        let chat = harness.restClient(at: CoreFixture.clientB, user: "alice", secret: "chat-secret")
        let plain = harness.restClient(at: .literal("192.0.2.3:40003"), user: "alice")
        #expect(try voice.allocate().isSuccess)
        #expect(try chat.allocate().isSuccess)
        #expect(try plain.allocate().isSuccess)
        // Every 401 on the shared address names the default realm.
        #expect(voice.realm == CoreFixture.realm)
        let users = harness.core.allocationRecords(.all, now: harness.now).map { "\($0.tenant)|\($0.user)" }.sorted()
        #expect(users == ["chat|chat/alice", "voice|voice/alice", "|alice"])
        let counts = harness.admission.tenantCounts
        #expect(counts["voice"]?.live == 1 && counts["chat"]?.live == 1 && counts[""]?.live == 1)
    }

    @Test("A tenant's listener address names its realm, and only its own credentials verify there")
    func listenerNamesTheTenant() throws {
        let harness = CoreHarness(options: Self.options())
        let chatAtVoice = harness.restClient(
            at: CoreFixture.clientA, user: "mallory", secret: "chat-secret", server: Self.voiceListener)
        let refused = try chatAtVoice.allocate()
        #expect(refused.errorCode == 401)
        #expect(chatAtVoice.realm == "voice.example")
        let defaultAtVoice = harness.restClient(at: CoreFixture.clientB, user: "mallory", server: Self.voiceListener)
        #expect(try defaultAtVoice.allocate().errorCode == 401)
        let voice = harness.restClient(
            at: .literal("192.0.2.3:40003"), user: "alice", secret: "voice-secret", server: Self.voiceListener)
        #expect(try voice.allocate().isSuccess)
        #expect(voice.realm == "voice.example")
        #expect(harness.core.allocationRecords(.all, now: harness.now).map(\.user) == ["voice/alice"])
    }

    @Test("ORIGIN names the tenant whose realm the 401 carries; an unknown ORIGIN is the shared address")
    func originNamesTheTenant() throws {
        let harness = CoreHarness(options: Self.options())
        let origin = Array("https://chat.example".utf8)
        let withOrigin: StunBody = { w in try origin.withUnsafeBytes { try w.append(.origin, value: $0) } }
        let chat = harness.restClient(at: CoreFixture.clientA, user: "carol", secret: "chat-secret")
        #expect(try chat.allocate(withOrigin).isSuccess)
        #expect(chat.realm == "chat.example")
        // A voice credential under chat's ORIGIN: only chat's secrets are tried.
        let voice = harness.restClient(at: CoreFixture.clientB, user: "dave", secret: "voice-secret")
        #expect(try voice.allocate(withOrigin).errorCode == 401)
        let other = Array("https://elsewhere.example".utf8)
        let elsewhere = harness.restClient(at: .literal("192.0.2.3:40003"), user: "erin", secret: "voice-secret")
        #expect(try elsewhere.allocate { w in try other.withUnsafeBytes { try w.append(.origin, value: $0) } }.isSuccess)
        #expect(elsewhere.realm == CoreFixture.realm)
    }

    @Test("Two tenants' allocations cannot reach each other unless both allow it")
    func isolation() throws {
        for (voiceAllows, chatAllows) in [(false, false), (true, false), (true, true)] {
            let harness = CoreHarness(
                options: Self.options {
                    $0.tenants[0].crossTenantRelay = voiceAllows
                    $0.tenants[1].crossTenantRelay = chatAllows
                })
            let voice = harness.restClient(at: CoreFixture.clientA, user: "alice", secret: "voice-secret")
            let voice2 = harness.restClient(at: .literal("192.0.2.3:40003"), user: "bob", secret: "voice-secret")
            let chat = harness.restClient(at: CoreFixture.clientB, user: "carol", secret: "chat-secret")
            let relayVoice = try #require(try voice.allocate().xorRelayedAddress)
            let relayVoice2 = try #require(try voice2.allocate().xorRelayedAddress)
            let relayChat = try #require(try chat.allocate().xorRelayedAddress)
            let both = voiceAllows && chatAllows
            #expect(try voice.createPermission([relayChat]).isSuccess == both)
            #expect(try chat.createPermission([relayVoice]).isSuccess == both)
            // Within one tenant, relay-to-relay works as always.
            #expect(try voice.createPermission([relayVoice2]).isSuccess)
            // A datagram from chat's relayed address at voice's relay socket: voice holds a
            // permission for the relay IP (through its own tenant's peer), the tenant check drops it.
            let socketVoice = try #require(harness.sockets.descriptor(boundTo: relayVoice))
            let delivered = harness.receiveFromPeer(Array("hi".utf8), from: relayChat, at: socketVoice)
            #expect(delivered.isEmpty == !both)
        }
    }

    @Test("A tenant's reservation holds capacity back from the others; its own total-quota caps it")
    func reservationsAndCaps() throws {
        let harness = CoreHarness(
            options: Self.options {
                $0.totalQuota = 3
                $0.tenants[0].limits = TenantLimits(reservedAllocations: 2)
                $0.tenants[1].limits = TenantLimits(totalQuota: 1)
            })
        var clients = (0..<6).map { TransportAddress.literal("192.0.2.\(10 + $0):40000") }.makeIterator()
        func allocate(_ secret: String, _ user: String) throws -> Int? {
            let client = harness.restClient(at: clients.next()!, user: user, secret: secret)
            let answer = try client.allocate()
            return answer.isSuccess ? 0 : answer.errorCode
        }
        // Default tenant: 3 - 2 reserved for voice = 1.
        #expect(try allocate(CoreFixture.secret, "a") == 0)
        #expect(try allocate(CoreFixture.secret, "b") == 508)
        // chat too is held at what voice reserved and does not use.
        #expect(try allocate("chat-secret", "c") == 508)
        // voice gets its two reserved allocations although the others are held at 1.
        #expect(try allocate("voice-secret", "d") == 0)
        #expect(try allocate("voice-secret", "e") == 0)
        #expect(try allocate("voice-secret", "f") == 508)
    }

    @Test("A tenant's own total-quota caps it while the node has room")
    func tenantTotalQuota() throws {
        let harness = CoreHarness(options: Self.options { $0.tenants[1].limits = TenantLimits(totalQuota: 1) })
        #expect(try harness.restClient(at: CoreFixture.clientA, user: "a", secret: "chat-secret").allocate().isSuccess)
        #expect(try harness.restClient(at: CoreFixture.clientB, user: "b", secret: "chat-secret").allocate().errorCode == 508)
        #expect(
            try harness.restClient(at: .literal("192.0.2.3:40003"), user: "c", secret: "voice-secret").allocate().isSuccess)
    }

    @Test("A tenant's user-quota counts its users apart from another tenant's users of the same name")
    func userQuotaPerTenant() throws {
        let harness = CoreHarness(
            options: Self.options {
                $0.userQuota = 5
                $0.tenants[0].limits = TenantLimits(userQuota: 1)
            })
        let first = harness.restClient(at: CoreFixture.clientA, user: "alice", secret: "voice-secret")
        let second = harness.restClient(at: CoreFixture.clientB, user: "alice", secret: "voice-secret")
        let chat = harness.restClient(at: .literal("192.0.2.3:40003"), user: "alice", secret: "chat-secret")
        #expect(try first.allocate().isSuccess)
        #expect(try second.allocate().errorCode == 486)
        #expect(try chat.allocate().isSuccess)
    }

    @Test("An admin scoped to a tenant lists and ends only that tenant's allocations")
    func adminScope() throws {
        let harness = CoreHarness(options: Self.options())
        #expect(try harness.restClient(at: CoreFixture.clientA, user: "alice", secret: "voice-secret").allocate().isSuccess)
        #expect(try harness.restClient(at: CoreFixture.clientB, user: "alice", secret: "chat-secret").allocate().isSuccess)
        #expect(harness.core.allocationRecords(.all, tenant: "voice", now: harness.now).map(\.user) == ["voice/alice"])
        #expect(harness.core.terminateAllocations(.user("chat/alice"), tenant: "voice", now: harness.now) == 0)
        #expect(harness.core.terminateAllocations(.all, tenant: "chat", now: harness.now) == 1)
        #expect(harness.core.allocationRecords(.all, now: harness.now).map(\.user) == ["voice/alice"])
    }

    @Test("A tenant allocation made on the shared address keeps the default realm through a stale nonce")
    func staleNonceOnSharedAddress() throws {
        let harness = CoreHarness(options: Self.options())
        let voice = harness.restClient(at: CoreFixture.clientA, user: "alice", secret: "voice-secret")
        #expect(try voice.allocate().isSuccess)
        harness.advance(by: 700)
        // The 438 names the realm the key was derived with, and the retry with it succeeds.
        let stale = try #require(try voice.send(try voice.signedRequest(.refresh)))
        #expect(stale.errorCode == 438)
        #expect(stale.realm == CoreFixture.realm)
        voice.learn(from: stale)
        #expect(try voice.refresh().isSuccess)
        #expect(try voice.createPermission([CoreFixture.peer1]).isSuccess)
    }

    @Test("A default-tenant user id that reads as a tenant's quota user is refused")
    func defaultUserLikeATenantUser() throws {
        let harness = CoreHarness(options: Self.options())
        #expect(try harness.restClient(at: CoreFixture.clientA, user: "voice/alice").allocate().errorCode == 401)
        #expect(try harness.restClient(at: CoreFixture.clientB, user: "nobody/alice").allocate().isSuccess)
        #expect(harness.core.allocationRecords(.all, now: harness.now).map(\.user) == ["nobody/alice"])
    }

    @Test("An RFC 6062 peer connection is bound only by its own tenant's user of that USERNAME")
    func bindIdentity() throws {
        let harness = CoreHarness(options: Self.options())
        #expect(harness.core.bindIdentity(username: "1:alice", tenant: 0) == "1:alice")
        #expect(harness.core.bindIdentity(username: "1:alice", tenant: 1) != harness.core.bindIdentity(username: "1:alice", tenant: 2))
        #expect(harness.core.bindIdentity(username: "1:alice", tenant: 1) != "1:alice")
    }

    @Test("An empty slot (a tenant a reload removed) verifies nothing and relays nothing")
    func emptySlot() throws {
        var options = Self.options()
        let harness = CoreHarness(options: options)
        #expect(try harness.restClient(at: CoreFixture.clientA, user: "a", secret: "voice-secret").allocate().isSuccess)
        options.tenants[0].name = "gone"
        var table = CoreFixture.tenants(options)
        table = TenantTable(
            slots: [nil, table.configured(2)], order: [2], byListener: [:], byOrigin: [:], byServerName: [:],
            defaultCrossTenantRelay: false)
        var context = harness.core.context
        context.tenants = table
        harness.core.update(context: context)
        #expect(try harness.restClient(at: CoreFixture.clientB, user: "b", secret: "voice-secret").allocate().errorCode == 401)
        #expect(try harness.restClient(at: .literal("192.0.2.3:40003"), user: "c", secret: "chat-secret").allocate().isSuccess)
        #expect(!harness.core.allowsLiveRelayed(CoreFixture.peer1, tenant: 1))
    }

    @Test("A tenant's own peer ranges and max-bps apply to its allocations only")
    func tenantPolicyAndBandwidth() throws {
        let harness = CoreHarness(
            options: Self.options {
                $0.tenants[0].deniedPeerIPs = [IPRange("1.2.3.0/24")!]
                $0.tenants[0].maxBPS = 1000
            })
        let voice = harness.restClient(at: CoreFixture.clientA, user: "alice", secret: "voice-secret")
        let chat = harness.restClient(at: CoreFixture.clientB, user: "bob", secret: "chat-secret")
        #expect(try voice.allocate().isSuccess)
        #expect(try chat.allocate().isSuccess)
        #expect(try voice.createPermission([CoreFixture.peer1]).errorCode == 403)
        #expect(try chat.createPermission([CoreFixture.peer1]).isSuccess)
        let leases = harness.core.allocationRecords(.all, now: harness.now).map(\.user).sorted()
        #expect(leases == ["chat/bob", "voice/alice"])
        let budgets = harness.core.table.all.map { ($0.lease.user, $0.lease.bytesPerSecond) }.sorted { $0.0 < $1.0 }
        #expect(budgets.map(\.1) == [0, 1000])
    }

    @Test("Without tenants, quota users, realms and records are what they always were")
    func noTenants() throws {
        let harness = CoreHarness()
        let alice = harness.restClient(at: CoreFixture.clientA, user: "alice")
        #expect(try alice.allocate().isSuccess)
        #expect(alice.realm == CoreFixture.realm)
        let records = harness.core.allocationRecords(.all, now: harness.now)
        #expect(records.map(\.user) == ["alice"] && records.map(\.tenant) == [""])
        #expect(try harness.restClient(at: CoreFixture.clientB, user: "x", secret: "voice-secret").allocate().errorCode == 401)
    }
}

@Suite struct WebOriginTests {
    @Test("ORIGIN values are compared as coturn stores them: lower case, the port written")
    func normalized() {
        #expect(WebOrigin.normalized("https://App.Example") == "https://app.example:443")
        #expect(WebOrigin.normalized("https://app.example:443") == "https://app.example:443")
        #expect(WebOrigin.normalized("http://app.example/") == "http://app.example:80")
        #expect(WebOrigin.normalized("HTTPS://app.example:8443") == "https://app.example:8443")
        #expect(WebOrigin.normalized("https://[2001:DB8::1]") == "https://[2001:db8::1]:443")
        #expect(WebOrigin.normalized("https://[2001:db8::1]:444") == "https://[2001:db8::1]:444")
        #expect(WebOrigin.normalized("null") == "null")
        #expect(WebOrigin.normalized("https://a.example/path") == "https://a.example/path")
        #expect(WebOrigin.normalized("https://a.example:x") == "https://a.example:x")
        #expect(WebOrigin.normalized("ftp://a.example") == "ftp://a.example")
    }
}
