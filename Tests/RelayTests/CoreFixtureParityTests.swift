import RelayCore
import StunCodec
import Testing

@testable import CoreFuzzing
@testable import CoreTestSupport
@testable import Relay

/// The core's tests and fuzzer build their `CoreContext` from the core's own types
/// (`CoreFixture`, `FuzzSession`); here each is held to the context `Relay` builds from the
/// configuration it stands for, so what they test is what the daemon would run.
@Suite struct CoreFixtureParityTests {
    /// The configuration `CoreFixture.options()` stands for.
    static func configuration(_ adjust: (inout RelayConfiguration) -> Void = { _ in }) -> RelayConfiguration {
        var c = RelayConfiguration()
        c.realm = CoreFixture.realm
        c.useAuthSecret = true
        c.staticAuthSecrets = [CoreFixture.secret]
        c.users = [.init(name: CoreFixture.staticUser, credential: .password(CoreFixture.staticPassword))]
        c.listeningIPs = [CoreFixture.server.ip]
        c.listeningPort = CoreFixture.server.port
        c.relayIPs = [CoreFixture.relayIP]
        c.minPort = CoreFixture.minPort
        c.maxPort = CoreFixture.maxPort
        adjust(&c)
        return c
    }

    /// What must agree: settings, peer policy, relay addresses, nonce lifetime, per-source
    /// limits, and the keys the credentials offer for a static user, a REST
    /// user and a stranger, under MD5 and SHA-256.
    static func expectSame(_ fixture: CoreContext, _ relay: CoreContext, users: [String], _ label: String) {
        #expect(fixture.settings == relay.settings, "\(label)")
        #expect(fixture.policy == relay.policy, "\(label)")
        #expect(fixture.relayAddresses == relay.relayAddresses, "\(label)")
        #expect(fixture.externalMappings == relay.externalMappings)
        #expect(fixture.nonces.lifetime == relay.nonces.lifetime)
        for (f, r) in [
            (fixture.sourceLimits.challenges, relay.sourceLimits.challenges),
            (fixture.sourceLimits.failures, relay.sourceLimits.failures),
            (fixture.sourceLimits.allocations, relay.sourceLimits.allocations),
        ] {
            #expect(f.perSecond == r.perSecond && f.burst == r.burst)
        }
        #expect(fixture.credentials.realm == relay.credentials.realm)
        for user in users + ["\(CoreFixture.start - 1):late", "nobody"] {
            for algorithm in [PasswordAlgorithm.md5, .sha256] {
                #expect(
                    fixture.credentials.candidateKeys(for: user, algorithm: algorithm, now: CoreFixture.start)
                        == relay.credentials.candidateKeys(for: user, algorithm: algorithm, now: CoreFixture.start),
                    "\(label): \(user) \(algorithm)")
            }
        }
    }

    static let publicIP = IPAddress.literal("203.0.113.7")
    static let relay6 = IPAddress.literal("2001:db8::5")

    /// Fixture options and the configuration each stands for.
    static let cases: [(String, CoreFixture.Options, RelayConfiguration)] = [
        ("default", CoreFixture.options(), configuration()),
        (
            "external-ip",
            CoreFixture.options {
                $0.relayAddresses = [RelayAddress(bound: CoreFixture.relayIP, advertised: publicIP)]
            },
            configuration { $0.externalIPs = [.init(publicIP: publicIP, privateIP: CoreFixture.relayIP)] }
        ),
        (
            "dual stack, ports, protocol settings",
            CoreFixture.options {
                $0.relayAddresses = [.unmapped(CoreFixture.relayIP), .unmapped(relay6)]
                $0.settings.minPort = 50002
                $0.settings.maxPort = 50003
                $0.settings.rfc5780 = true
                $0.settings.rfc3489Compatibility = true
                $0.settings.tcpRelay = false
                $0.settings.maxTCPConnectionsPerAllocation = 1
                $0.settings.passwordAlgorithms = [.md5]
                $0.settings.maxBPS = 1000
                $0.settings.fingerprint = true
                $0.settings.mobility = false
                $0.settings.softwareAttribute = "relayd test"
                $0.settings.maxAllocateLifetime = 120
                $0.settings.maxPermissionsPerAllocation = 2
            },
            configuration {
                $0.relayIPs = [CoreFixture.relayIP, relay6]
                $0.minPort = 50002
                $0.maxPort = 50003
                $0.rfc5780 = true
                $0.rfc3489Compatibility = true
                $0.noTCPRelay = true
                $0.maxTCPRelayConnections = 1
                $0.passwordAlgorithms = [.md5]
                $0.maxBPS = 1000
                $0.fingerprint = true
                $0.mobility = false
                $0.softwareAttribute = "relayd test"
                $0.maxAllocateLifetime = 120
                $0.maxPermissionsPerAllocation = 2
            }
        ),
        (
            "policy, limits, secrets",
            CoreFixture.options {
                $0.deniedPeerIPs = [IPRange("1.2.3.0/24")!]
                $0.allowedPeerIPs = [IPRange("10.1.0.0/16")!]
                $0.allowLoopbackPeers = true
                $0.restSecrets = ["new-secret", "old-secret"]
                $0.bpsCapacity = 1500
                $0.unauthRateLimit = 2
                $0.unauthRateBurst = 3
                $0.authFailureRateLimit = 1
                $0.allocateRateLimit = 4
            },
            configuration {
                $0.deniedPeerIPs = [IPRange("1.2.3.0/24")!]
                $0.allowedPeerIPs = [IPRange("10.1.0.0/16")!]
                $0.allowLoopbackPeers = true
                $0.staticAuthSecrets = ["new-secret", "old-secret"]
                $0.bpsCapacity = 1500
                $0.unauthRateLimit = 2
                $0.unauthRateBurst = 3
                $0.authFailureRateLimit = 1
                $0.allocateRateLimit = 4
            }
        ),
    ]

    @Test(
        "CoreFixture's context is the one Relay builds from the configuration it stands for", arguments: cases.indices)
    func fixtureMatchesConfiguration(index: Int) {
        let (label, options, configuration) = Self.cases[index]
        let interfaces = [IPAddress.literal("10.0.0.9")]
        let ledger = LocalAdmissionLedger()
        Self.expectSame(
            CoreFixture.context(options, ledger: ledger, interfaceAddresses: interfaces),
            CoreContext(
                configuration: configuration, nonceKey: Array(0..<32), ledger: ledger, interfaceAddresses: interfaces),
            users: [CoreFixture.staticUser, CoreFixture.restUsername()], label)
        // The admission limits (user-quota, total-quota, bps-capacity) live in the ledger.
        #expect(CoreFixture.limits(options) == LocalAdmissionLedger.Limits(configuration: configuration), "\(label)")
    }

    @Test("FuzzSession's context is the one Relay builds from the configuration its comment names")
    func fuzzSessionMatchesConfiguration() {
        var c = RelayConfiguration()
        c.realm = FuzzSession.realm
        c.useAuthSecret = true
        c.staticAuthSecrets = [FuzzSession.secret]
        c.listeningIPs = [FuzzSession.server.ip, .literal("192.0.2.101")]
        c.listeningPort = FuzzSession.server.port
        c.altListeningPort = FuzzSession.server.port + 1
        c.rfc5780 = true
        c.rfc3489Compatibility = true
        c.relayIPs = [.literal("10.0.0.5"), .literal("2001:db8::5")]
        c.minPort = 50000
        c.maxPort = 50007
        let session = FuzzSession()
        Self.expectSame(
            session.core.context, CoreContext(configuration: c, nonceKey: Array(0..<32), ledger: session.quota),
            users: ["\(FuzzSession.start + 86_400):fuzz0"], "FuzzSession")
    }
}
