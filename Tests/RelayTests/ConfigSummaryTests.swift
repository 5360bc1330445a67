import Relay
import Testing

/// The effective configuration can be logged without leaking a secret.
@Suite struct ConfigSummaryTests {
    private static let secrets = [
        "n0rthSecret", "s0uthSecret", "alicePassw0rd", "0123456789abcdef0123456789abcdef", "keyFilePassw0rd",
        "apiT0ken",
    ]

    private func loaded() throws -> RelayConfiguration {
        let text = """
            lt-cred-mech
            use-auth-secret
            static-auth-secret=n0rthSecret
            static-auth-secret=s0uthSecret
            user=alice:alicePassw0rd
            user=bob:0x0123456789abcdef0123456789abcdef
            pkey-pwd=keyFilePassw0rd
            api-key=ops:apiT0ken
            listening-port=3479
            denied-peer-ip=10.0.0.0/8
            """
        return try RelayConfiguration.load(fileText: text, fileName: "conf/relayd.conf").configuration
    }

    @Test func summaryNeverContainsSecretText() throws {
        let summary = try loaded().redactedSummary()
        let text = summary.map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        for secret in Self.secrets {
            #expect(!text.contains(secret), "summary leaks \(secret)")
        }
    }

    @Test func secretsAreMaskedButNamesStay() throws {
        let summary = try loaded().redactedSummary()
        func values(_ key: String) -> [String] { summary.filter { $0.key == key }.map(\.value) }
        #expect(values("static-auth-secret") == ["***", "***"])
        #expect(values("user") == ["alice:***", "bob:***"])
        #expect(values("pkey-pwd") == ["***"])
        #expect(values("api-key") == ["ops:***"])
    }

    @Test func summaryShowsEffectiveValues() throws {
        let summary = try loaded().redactedSummary()
        func values(_ key: String) -> [String] { summary.filter { $0.key == key }.map(\.value) }
        #expect(values("listening-port") == ["3479"])
        #expect(values("denied-peer-ip") == ["10.0.0.0/8"])
        #expect(values("lt-cred-mech") == ["true"])
        #expect(values("realm") == ["relayd"])
        #expect(values("log-format") == ["text"])
        #expect(values("log-level") == ["info"])
        #expect(values("cert").isEmpty)
    }
}
