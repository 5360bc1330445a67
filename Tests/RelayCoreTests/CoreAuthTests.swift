import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The long-term credential mechanism as the core applies it (RFC 8489 §9.2.4, RFC 8656 §5).
@Suite struct CoreAuthTests {
    private func allocateBody(_ w: inout StunMessageWriter) throws { try w.append(RequestedTransport.udp) }

    @Test("A nonce older than stale-nonce gets 438 with a new NONCE and REALM; the new nonce then works")
    func staleNonce() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        try client.challenge()
        let issued = try #require(client.nonce)

        harness.advance(by: 601)
        let stale = try #require(try client.send(try client.signedRequest(.allocate, allocateBody)))
        #expect(stale.errorCode == 438)
        #expect(stale.realm == CoreFixture.realm)
        let fresh = try #require(stale.nonce)
        #expect(fresh != issued)
        #expect(!stale.contains(.messageIntegrity))
        #expect(harness.counters.authenticated(.staleNonce) == 1)

        client.learn(from: stale)
        #expect(try #require(try client.send(try client.signedRequest(.allocate, allocateBody))).isSuccess)
    }

    @Test("A nonce just under stale-nonce old is still accepted")
    func nonceAlmostStale() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        try client.challenge()
        harness.advance(by: 599)
        #expect(try #require(try client.send(try client.signedRequest(.allocate, allocateBody))).isSuccess)
    }

    @Test(
        "A nonce this server did not issue gets 438 with a new NONCE",
        arguments: [
            "0123456789abcdef01234567", "6553f100deadbeefdeadbeef", "", "x", "6553f1006553f1006553f1006553f100",
            "6553F100DEADBEEFDEADBEEF",
        ])
    func forgedNonce(nonce: String) throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        try client.challenge()
        client.nonce = nonce
        let response = try #require(try client.send(try client.signedRequest(.allocate, allocateBody)))
        #expect(response.errorCode == 438)
        #expect(response.nonce != nil && response.nonce != nonce)
        #expect(harness.core.allocationCount == 0)
    }

    @Test("A nonce issued to another client IP gets 438")
    func nonceOfAnotherClient() throws {
        let harness = CoreHarness()
        let other = harness.restClient(at: CoreFixture.clientB)
        try other.challenge()
        let client = harness.restClient(at: CoreFixture.clientA)
        client.realm = other.realm
        client.nonce = other.nonce
        let response = try #require(try client.send(try client.signedRequest(.allocate, allocateBody)))
        #expect(response.errorCode == 438)
    }

    @Test("A wrong password gets 401 with REALM and NONCE, and nothing is allocated")
    func wrongPassword() throws {
        let harness = CoreHarness()
        let username = CoreFixture.restUsername()
        let client = harness.client(at: CoreFixture.clientA, username: username, password: "not-the-password")
        let response = try client.allocate()
        #expect(response.errorCode == 401)
        #expect(response.realm == CoreFixture.realm)
        #expect(response.nonce != nil)
        #expect(!response.contains(.messageIntegrity))
        #expect(harness.core.allocationCount == 0)
        #expect(harness.counters.authenticated(.badIntegrity) == 1)
    }

    @Test("A REST username whose expiry has passed gets 401", arguments: [-1, 0] as [Int64])
    func expiredRestUsername(validFor: Int64) throws {
        let harness = CoreHarness()
        let response = try harness.restClient(at: CoreFixture.clientA, validFor: validFor).allocate()
        #expect(response.errorCode == 401)
        #expect(harness.counters.authenticated(.expired) == 1)
        #expect(harness.core.allocationCount == 0)
    }

    @Test("An unknown user gets 401")
    func unknownUser() throws {
        let harness = CoreHarness()
        let response = try harness.client(at: CoreFixture.clientA, username: "mallory", password: "x").allocate()
        #expect(response.errorCode == 401)
        #expect(harness.counters.authenticated(.unknownUser) == 1)
    }

    @Test(
        "MESSAGE-INTEGRITY without USERNAME, REALM or NONCE gets 400 (RFC 8489 §9.2.4)",
        arguments: [AttributeType.username, .realm, .nonce])
    func integrityWithoutCredentialAttributes(missing: AttributeType) throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        try client.challenge()
        let signature = try #require(client.signature)
        let request = try StunTestMessages.request(.allocate) { w in
            try w.append(RequestedTransport.udp)
            if missing != .username { try w.append(Username(value: signature.username)) }
            if missing != .realm { try w.append(Realm(value: signature.realm)) }
            if missing != .nonce { try w.append(Nonce(value: signature.nonce)) }
            try w.appendMessageIntegrity(key: signature.key)
        }
        let response = try #require(try client.send(request))
        #expect(response.errorCode == 400)
    }

    @Test(
        "A request with another USERNAME on an existing allocation gets 441 (RFC 8656 §5)",
        arguments: [Method.refresh, .createPermission])
    func differentUsernameOnAllocation(method: Method) throws {
        let harness = CoreHarness()
        #expect(try harness.restClient(at: CoreFixture.clientA, user: "alice").allocate().isSuccess)
        let intruder = harness.restClient(at: CoreFixture.clientA, user: "eve")
        let response = try intruder.request(method) { w in
            if method == .createPermission { try w.append(XORPeerAddress(address: CoreFixture.peer1)) }
        }
        #expect(response.errorCode == 441)
        #expect(harness.allocation(of: CoreFixture.clientA)?.permissions.isEmpty == true)
    }

    @Test("A password minted under any configured REST secret is accepted (secret rotation)")
    func restSecretRotation() throws {
        let harness = CoreHarness(
            options: CoreFixture.options { $0.restSecrets = ["new-secret", "old-secret"] })
        #expect(try harness.restClient(at: CoreFixture.clientA, secret: "old-secret").allocate().isSuccess)
        #expect(try harness.restClient(at: CoreFixture.clientB, secret: "new-secret").allocate().isSuccess)
        let stranger = harness.restClient(at: .literal("192.0.2.3:40003"), secret: "unknown-secret")
        #expect(try stranger.allocate().errorCode == 401)
    }

    @Test(
        "After the secret an allocation was made under is removed, the allocation keeps refreshing with its key (RFC 8656 §8)"
    )
    func refreshSurvivesRotation() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        let rotated = CoreFixture.options { $0.restSecrets = ["brand-new-secret"] }
        harness.core.update(
            context: CoreFixture.context(rotated, ledger: harness.admission))
        let response = try client.refresh()
        #expect(response.isSuccess)
        #expect(response.integrity(key: client.key) == .valid)
    }

    @Test(
        "Responses to authenticated requests carry MESSAGE-INTEGRITY under the request's key", arguments: [false, true])
    func responsesAreSigned(fingerprint: Bool) throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        client.fingerprint = fingerprint
        let allocated = try client.allocate()
        let permitted = try client.createPermission([CoreFixture.peer1])
        let refused = try client.createPermission([.literal("10.1.2.3:5000")])
        for response in [allocated, permitted, refused] {
            #expect(response.integrity(key: client.key) == .valid)
            #expect(response.contains(.fingerprint) == fingerprint)
        }
        #expect(refused.errorCode == 403)
    }

    @Test(
        "USERNAME or REALM over 763 bytes gets 400 even with a valid MESSAGE-INTEGRITY (RFC 8489 §14.3, §14.9)",
        arguments: [(753, 0), (1200, 0), (0, 1000)])
    func oversizeUsernameOrRealm(usernamePadding: Int, realmLength: Int) throws {
        let harness = CoreHarness()
        let probe = harness.restClient(at: CoreFixture.clientA)
        try probe.challenge()
        let username = CoreFixture.restUsername(String(repeating: "u", count: max(1, usernamePadding)))
        let realm = realmLength > 0 ? String(repeating: "r", count: realmLength) : CoreFixture.realm
        let key = KeyDerivation.longTermKeyMD5(
            username: username, realm: CoreFixture.realm, password: CoreFixture.restPassword(username))
        let request = try StunTestMessages.build(MessageType(method: .allocate, messageClass: .request)) { w in
            try w.append(RequestedTransport.udp)
            try appendRaw(&w, .username, Array(username.utf8))
            try appendRaw(&w, .realm, Array(realm.utf8))
            try w.append(Nonce(value: try #require(probe.nonce)))
            try w.appendMessageIntegrity(key: key)
        }
        let answer = try ReceivedStun(try #require(harness.receive(request, from: CoreFixture.clientA).first).bytes)
        #expect(answer.errorCode == 400)
        #expect(harness.core.allocationCount == 0)
    }
}

/// Appends an attribute of any length, bypassing the typed encoders' limits (test inputs only).
private func appendRaw(_ w: inout StunMessageWriter, _ type: AttributeType, _ bytes: [UInt8]) throws {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
    defer { buffer.deallocate() }
    buffer.copyBytes(from: bytes)
    try w.append(type, value: UnsafeRawBufferPointer(buffer))
}

/// A USERNAME that breaks RFC 8489 §14.3 gets 400 even with the right password for it.
@Suite struct CoreUsernameTests {
    /// A REST client whose user id is `user` and whose password is right for the whole name.
    private func client(_ harness: CoreHarness, user: String) -> TurnTestClient {
        let username = CoreFixture.restUsername(user)
        return harness.client(
            at: CoreFixture.clientA, username: username, password: CoreFixture.restPassword(username))
    }

    @Test(
        "Too long or with control characters: 400, no allocation, counted as malformed",
        arguments: [String(repeating: "u", count: 600 - 11), "probe\r\nFAKE LOG LINE %n%s", "nul\u{0}byte", "bell\u{7}"])
    func refused(user: String) throws {
        let harness = CoreHarness()
        let response = try client(harness, user: user).allocate()
        #expect(response.errorCode == 400)
        #expect(harness.core.allocationCount == 0)
        #expect(harness.counters.auth[AuthOutcome.malformed.rawValue] == 1)
    }

    @Test("508 bytes with the right password allocates")
    func longestAccepted() throws {
        let harness = CoreHarness()
        let user = String(repeating: "u", count: 508 - CoreFixture.restUsername("").utf8.count)
        #expect(CoreFixture.restUsername(user).utf8.count == 508)
        #expect(try client(harness, user: user).allocate().isSuccess)
    }
}

extension CoreUsernameTests {
    @Test("400s to malformed usernames come out of the source's failure budget")
    func malformedIsAFailure() throws {
        let harness = CoreHarness(options: CoreFixture.options { $0.authFailureRateLimit = 1 })
        let user = "bad\u{7}name"
        var answered = 0
        for _ in 0..<5 {
            if (try? client(harness, user: user).allocate())?.errorCode == 400 { answered += 1 }
        }
        #expect(answered == 2)
        #expect(harness.counters.dropped(.authFailureLimited) == 3)
    }
}
