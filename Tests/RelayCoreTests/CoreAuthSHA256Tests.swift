import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// RFC 8489's security features as the core applies them (§9.2.1, §9.2.4): the nonce cookie,
/// PASSWORD-ALGORITHMS and PASSWORD-ALGORITHM with their bid-down checks, SHA-256 keys,
/// MESSAGE-INTEGRITY-SHA256, and USERHASH.
@Suite struct CoreAuthSHA256Tests {
    private static func sha256Key(_ username: String, _ password: String) -> [UInt8] {
        KeyDerivation.longTermKeySHA256(
            username: Array(username.utf8), realm: Array(CoreFixture.realm.utf8), password: Array(password.utf8))
    }

    /// A REST client that picks SHA-256 from the server's list.
    private func sha256Client(_ harness: CoreHarness, at address: TransportAddress = CoreFixture.clientA) throws
        -> TurnTestClient
    {
        let client = harness.restClient(at: address)
        client.algorithm = .sha256
        client.integrity = .sha256
        try client.challenge()
        return client
    }

    @Test("A 401 announces the features: nonce cookie obMatJos2gAAA, PASSWORD-ALGORITHMS SHA-256 then MD5")
    func challengeAnnounces() throws {
        let harness = CoreHarness()
        let challenge = try harness.restClient(at: CoreFixture.clientA).challenge()
        #expect(challenge.errorCode == 401)
        let nonce = try #require(challenge.nonce)
        #expect(nonce.hasPrefix("obMatJos2gAAA"))
        #expect(nonce.utf8.count == 13 + 24)
        #expect(challenge.decode(PasswordAlgorithms.self)?.algorithms == [.sha256, .md5])
    }

    @Test("Allocate, CreatePermission, ChannelBind, Refresh and data with a SHA-256 key: answers carry MESSAGE-INTEGRITY-SHA256")
    func sha256Flow() throws {
        let harness = CoreHarness()
        let client = try sha256Client(harness)
        let allocated = try client.allocate()
        #expect(allocated.isSuccess, "\(allocated.description)")
        #expect(allocated.contains(.messageIntegritySHA256) && !allocated.contains(.messageIntegrity))
        let key = Self.sha256Key(client.username, client.password)
        #expect(allocated.integrity(key: key) == .valid)
        #expect(harness.allocation(of: CoreFixture.clientA)?.key == key)
        // The allocation, its counter and its log line say how it authenticated.
        let credentials = try #require(harness.allocation(of: CoreFixture.clientA)?.credentials)
        #expect(credentials.passwordAlgorithm == .sha256 && credentials.passwordLabel == "sha256")
        #expect(harness.counters.allocationsByCredentials[credentials.index] == 1)
        #expect(harness.counters.allocationsByCredentials.reduce(0, +) == 1)
        #expect(try client.createPermission([CoreFixture.peer1]).integrity(key: key) == .valid)
        let bound = try client.channelBind(0x4001, to: CoreFixture.peer1)
        #expect(bound.isSuccess && bound.integrity(key: key) == .valid)
        let refreshed = try client.refresh(lifetime: 300)
        #expect(refreshed.isSuccess && refreshed.contains(.messageIntegritySHA256))
        let sent = harness.receive(StunTestMessages.channelData(0x4001, [1, 2, 3]), from: CoreFixture.clientA)
        #expect(sent.first?.peer?.peer == CoreFixture.peer1)
        #expect(sent.first?.bytes == [1, 2, 3])
    }

    @Test("A client of RFC 5389 (no PASSWORD-ALGORITHM(S), MESSAGE-INTEGRITY) is answered as before, with MESSAGE-INTEGRITY")
    func legacyClient() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let allocated = try client.allocate()
        #expect(allocated.isSuccess)
        #expect(allocated.contains(.messageIntegrity) && !allocated.contains(.messageIntegritySHA256))
        #expect(allocated.integrity(key: client.key) == .valid)
        #expect(harness.allocation(of: CoreFixture.clientA)?.credentials == CredentialAlgorithms())
        #expect(harness.counters.allocationsByCredentials == [1, 0, 0, 0])
    }

    @Test(
        "Bid-down checks (RFC 8489 §9.2.4): a stripped or altered PASSWORD-ALGORITHMS, or a choice off the list, gets 400",
        arguments: [
            ([PasswordAlgorithm]?.none, PasswordAlgorithm?.some(.sha256)),
            ([.md5], .md5),
            ([.md5, .sha256], .sha256),
            ([.sha256], .sha256),
            ([.sha256, .md5], PasswordAlgorithm(algorithm: 3, parameters: [])),
            ([.sha256, .md5], nil),
        ] as [([PasswordAlgorithm]?, PasswordAlgorithm?)])
    func bidDown(listed: [PasswordAlgorithm]?, chosen: PasswordAlgorithm?) throws {
        let harness = CoreHarness()
        let client = try sha256Client(harness)
        var signature = try #require(client.signature)
        signature.listed = listed
        signature.chosen = chosen
        let request = try StunTestMessages.request(.allocate, signature: signature) { w in
            try w.append(RequestedTransport.udp)
        }
        let answer = try #require(try client.send(request))
        #expect(answer.errorCode == 400)
        #expect(harness.core.allocationCount == 0)
        #expect(harness.counters.authenticated(.malformed) == 1)
    }

    @Test("A client mixing MESSAGE-INTEGRITY and MESSAGE-INTEGRITY-SHA256 has both checked, and is answered with MESSAGE-INTEGRITY-SHA256")
    func mixedIntegrity() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        client.integrity = .both
        let allocated = try client.allocate()
        #expect(allocated.isSuccess)
        #expect(allocated.contains(.messageIntegritySHA256) && !allocated.contains(.messageIntegrity))
        #expect(allocated.integrity(key: client.key) == .valid)

        // One of the two wrong: 401.
        let other = harness.restClient(at: CoreFixture.clientB)
        try other.challenge()
        var signature = try #require(other.signature)
        signature.integrity = .both
        let good = try StunTestMessages.request(.allocate, signature: signature) { w in try w.append(RequestedTransport.udp) }
        var bad = good
        bad[bad.count - 1] ^= 0x01  // the last byte of MESSAGE-INTEGRITY-SHA256
        #expect(try #require(try other.send(bad)).errorCode == 401)
    }

    @Test("A nonce whose cookie was changed or stripped on the way is not this server's: 438")
    func cookieTampering() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        try client.challenge()
        let nonce = try #require(client.nonce)
        for forged in ["obMatJos2AAAA" + nonce.dropFirst(13), String(nonce.dropFirst(13))] {
            client.nonce = forged
            let answer = try #require(try client.send(try client.signedRequest(.allocate) { w in
                try w.append(RequestedTransport.udp)
            }))
            #expect(answer.errorCode == 438, "\(forged)")
        }
        #expect(harness.core.allocationCount == 0)
    }

    @Test("USERHASH finds a static user, with SHA-256 and with MD5; a REST user cannot be found by hash (401)")
    func userhash() throws {
        let harness = CoreHarness()
        for (address, algorithm) in [(CoreFixture.clientA, PasswordAlgorithm?.some(.sha256)), (CoreFixture.clientB, nil)] {
            let client = harness.client(at: address, username: CoreFixture.staticUser, password: CoreFixture.staticPassword)
            client.algorithm = algorithm
            client.integrity = algorithm == nil ? .sha1 : .sha256
            client.userhash = true
            let allocated = try client.allocate()
            #expect(allocated.isSuccess, "\(allocated.description)")
            #expect(harness.allocation(of: address)?.username == CoreFixture.staticUser)
        }
        let rest = harness.restClient(at: TransportAddress.literal("192.0.2.3:40003"))
        rest.userhash = true
        #expect(try rest.allocate().errorCode == 401)
        #expect(harness.counters.authenticated(.unknownUser) == 1)
    }

    @Test("USERHASH and USERNAME together, or neither with an integrity attribute: 400")
    func userhashAndUsername() throws {
        let harness = CoreHarness()
        let client = try sha256Client(harness)
        let signature = try #require(client.signature)
        let both = try StunTestMessages.request(.allocate) { w in
            try w.append(RequestedTransport.udp)
            try w.append(Userhash(bytes: [UInt8](repeating: 1, count: 32)))
            try w.append(Username(value: signature.username))
            try w.append(Realm(value: signature.realm))
            try w.append(Nonce(value: signature.nonce))
            try w.appendMessageIntegritySHA256(key: signature.key)
        }
        #expect(try #require(try client.send(both)).errorCode == 400)
    }

    @Test("password-algorithms = md5: RFC 5389 nonces and no PASSWORD-ALGORITHMS")
    func md5Only() throws {
        let harness = CoreHarness(options: CoreFixture.options { $0.settings.passwordAlgorithms = [.md5] })
        let client = harness.restClient(at: CoreFixture.clientA)
        let challenge = try client.challenge()
        #expect(challenge.nonce?.utf8.count == 24)
        #expect(!challenge.contains(.passwordAlgorithms))
        #expect(try client.allocate().isSuccess)
    }

    @Test("password-algorithms = sha256: a request processed as MD5 gets 400, SHA-256 works")
    func sha256Only() throws {
        let harness = CoreHarness(options: CoreFixture.options { $0.settings.passwordAlgorithms = [.sha256] })
        let legacy = harness.restClient(at: CoreFixture.clientA)
        #expect(try legacy.allocate().errorCode == 400)
        let client = try sha256Client(harness, at: CoreFixture.clientB)
        #expect(client.offered == [.sha256])
        #expect(try client.allocate().isSuccess)
    }

    @Test("A 438 to a SHA-256 client lists PASSWORD-ALGORITHMS again, and the retry with the new nonce works")
    func staleNonceSHA256() throws {
        let harness = CoreHarness()
        let client = try sha256Client(harness)
        harness.advance(by: 601)
        let stale = try #require(try client.send(try client.signedRequest(.allocate) { w in
            try w.append(RequestedTransport.udp)
        }))
        #expect(stale.errorCode == 438)
        #expect(stale.decode(PasswordAlgorithms.self)?.algorithms == [.sha256, .md5])
        client.learn(from: stale)
        #expect(try client.allocate().isSuccess)
    }
}
