import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// Binding (RFC 8489 §6.3.1): any source gets its reflexive transport address, unauthenticated.
@Suite struct CoreBindingTests {
    @Test(
        "A Binding success response carries XOR-MAPPED-ADDRESS with the request's source transport address",
        arguments: ["192.0.2.1:40001", "198.51.100.9:1", "[2001:db8::7]:65535"])
    func bindingReflectsSource(source: String) throws {
        let harness = CoreHarness()
        let client = TransportAddress.literal(source)
        let request = try StunTestMessages.binding()
        let sent = harness.receive(request, from: client)

        try #require(sent.count == 1)
        #expect(sent[0].client == client)
        let response = try ReceivedStun(sent[0].bytes)
        #expect(response.type == .bindingSuccess)
        #expect(response.transactionID == (try ReceivedStun(request)).transactionID)
        #expect(response.xorMappedAddress == client)
        #expect(!response.contains(.messageIntegrity))
        #expect(harness.counters.bindingRequests == 1)
    }

    @Test("A response to a request with FINGERPRINT carries FINGERPRINT as its last attribute (RFC 8489 §6.3)")
    func fingerprintIsEchoed() throws {
        let harness = CoreHarness()
        let sent = harness.receive(try StunTestMessages.binding(fingerprint: true), from: CoreFixture.clientA)
        let response = try ReceivedStun(try #require(sent.first).bytes)
        #expect(response.attributeTypes.last == .fingerprint)
    }

    @Test("SOFTWARE is sent only when software-attribute is configured (RFC 8489 §14.14)")
    func softwareWhenConfigured() throws {
        let quiet = CoreHarness()
        let plain = try ReceivedStun(
            try #require(quiet.receive(try StunTestMessages.binding(), from: CoreFixture.clientA).first).bytes)
        #expect(!plain.contains(.software))

        let chatty = CoreHarness(options: CoreFixture.options { $0.settings.softwareAttribute = "relayd test" })
        let named = try ReceivedStun(
            try #require(chatty.receive(try StunTestMessages.binding(), from: CoreFixture.clientA).first).bytes)
        #expect(named.decode(Software.self)?.value == "relayd test")
    }
}
