import Relay
import StunCodec
import Testing

/// Which certificate the HTTPS API serves, and when check-config warns about a plain one.
@Suite struct APITLSConfigTests {
    @Test("api-cert turns HTTPS on with its own key file by default; api-tls reuses cert and pkey")
    func derivation() throws {
        let own = try RelayConfiguration.load(
            fileText: "no-auth\napi-cert=/etc/relayd/api.pem\ncert=/etc/relayd/turn.pem\n", fileName: "c.conf"
        ).configuration
        #expect(own.apiUsesTLS)
        let reused = try RelayConfiguration.load(
            fileText: "no-auth\napi-tls\ncert=/etc/relayd/turn.pem\npkey=/etc/relayd/turn.key\n", fileName: "c.conf"
        ).configuration
        #expect(reused.apiUsesTLS)
        let plain = try RelayConfiguration.load(fileText: "no-auth\n", fileName: "c.conf").configuration
        #expect(!plain.apiUsesTLS)
    }

    @Test("check-config warns about an API beyond loopback in clear, not on loopback or with TLS")
    func warning() {
        var c = RelayConfiguration()
        c.noAuth = true
        c.stunOnly = true
        let loopback: [IPAddress] = [.ipv4Loopback]
        #expect(!ConfigAdvisor.warnings(for: c, interfaceAddresses: loopback).contains { $0.contains("without TLS") })
        c.apiListeningIP = .ipv4Any
        #expect(ConfigAdvisor.warnings(for: c, interfaceAddresses: loopback).contains { $0.contains("without TLS") })
        c.apiTLS = true
        #expect(!ConfigAdvisor.warnings(for: c, interfaceAddresses: loopback).contains { $0.contains("without TLS") })
    }
}
