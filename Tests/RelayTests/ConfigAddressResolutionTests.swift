import Relay
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The one place listening and relay addresses left to the machine are filled in, and the one
/// place the core's defaults are written.
@Suite struct ConfigAddressResolutionTests {
    static let interfaces: [IPAddress] = [.literal("10.0.0.5"), .literal("192.0.2.7")]

    @Test("No listening-ip: every interface address; no relay-ip: the listening addresses")
    func fillsBoth() {
        let c = RelayConfiguration().resolvingAddresses(interfaces: Self.interfaces)
        #expect(c.listeningIPs == Self.interfaces)
        #expect(c.relayIPs == Self.interfaces)
    }

    @Test("A wildcard listening-ip is no relay address; explicit values are kept")
    func keepsExplicitValues() {
        var c = RelayConfiguration()
        c.listeningIPs = [.ipv4Any, .literal("10.0.0.5")]
        #expect(c.resolvingAddresses(interfaces: Self.interfaces).relayIPs == [.literal("10.0.0.5")])
        c.relayIPs = [.literal("192.0.2.7")]
        let resolved = c.resolvingAddresses(interfaces: Self.interfaces)
        #expect(resolved.relayIPs == [.literal("192.0.2.7")])
        #expect(resolved.listeningIPs == [.ipv4Any, .literal("10.0.0.5")])
    }

    @Test("The configuration's defaults are the core's")
    func defaultsAreTheCores() {
        let c = RelayConfiguration()
        #expect(CoreSettings(configuration: c) == CoreSettings.defaults)
    }
}
