@testable import Relay
import StunCodec
import Testing

/// Whether a configuration's descriptors fit the process's limit (`relayd check-config`,
/// docs/configuration.md).
@Suite struct DescriptorBudgetTests {
    static func configuration(_ edit: (inout RelayConfiguration) -> Void) -> RelayConfiguration {
        var c = RelayConfiguration()
        c.relayIPs = [IPAddress("10.0.0.1")!]
        c.listeningIPs = [IPAddress("10.0.0.1")!]
        c.relayThreads = 2
        edit(&c)
        return c
    }

    @Test("Relay ports times relay addresses, capped by total-quota, plus clients, against the limit")
    func budget() {
        let wide = DescriptorBudget(configuration: Self.configuration {
            $0.minPort = 49152
            $0.maxPort = 65535
            $0.relayIPs = [IPAddress("10.0.0.1")!, IPAddress("fd00::1")!]
        }, limit: 20_000)
        #expect(wide.ports == 16384 && wide.relayAddresses == 2 && wide.relaySockets == 32768)
        #expect(wide.connections == 10_000)
        #expect(wide.total == 32768 + 10_000 + wide.fixed && !wide.fits)
        #expect(wide.warning?.contains("limit here is 20000") == true)
        #expect(wide.summary.contains("does NOT fit"))

        let capped = DescriptorBudget(configuration: Self.configuration {
            $0.minPort = 49152
            $0.maxPort = 65535
            $0.totalQuota = 4000
            $0.maxConnections = 2000
        }, limit: 20_000)
        #expect(capped.relaySockets == 4000 && capped.connections == 2000 && capped.fits && capped.warning == nil)
        #expect(capped.summary.contains("under total-quota") && capped.summary.hasSuffix("fits"))

        let udpOnly = DescriptorBudget(configuration: Self.configuration {
            $0.noTCP = true
            $0.noTLS = true
        }, limit: 1_000_000)
        #expect(udpOnly.connections == 0)
    }
}
