import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport
@testable import RelayCore

/// Allocate (RFC 8656 §7.1, §7.2; RFC 6156 §4).
@Suite struct CoreAllocateTests {
    @Test("An Allocate without MESSAGE-INTEGRITY is challenged: 401 with REALM and NONCE, no MESSAGE-INTEGRITY")
    func unauthenticatedAllocateIsChallenged() throws {
        let harness = CoreHarness()
        let request = try StunTestMessages.request(.allocate) { w in try w.append(RequestedTransport.udp) }
        let sent = harness.receive(request, from: CoreFixture.clientA)

        try #require(sent.count == 1)
        let response = try ReceivedStun(sent[0].bytes)
        #expect(response.type == MessageType(method: .allocate, messageClass: .errorResponse))
        #expect(response.errorCode == 401)
        #expect(response.realm == CoreFixture.realm)
        // The nonce cookie (13 characters, RFC 8489 §9.2.1) and the 24 of the nonce itself.
        #expect(response.nonce?.utf8.count == 37)
        #expect(!response.contains(.messageIntegrity))
        #expect(harness.sockets.opens == 0)
        #expect(harness.core.allocationCount == 0)
        #expect(harness.counters.authenticated(.challenged) == 1)
    }

    @Test(
        "An authenticated Allocate gets XOR-RELAYED-ADDRESS, LIFETIME 600, XOR-MAPPED-ADDRESS and valid MESSAGE-INTEGRITY"
    )
    func authenticatedAllocateSucceeds() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        let response = try client.allocate()

        #expect(response.type == MessageType(method: .allocate, messageClass: .successResponse))
        let relayed = try #require(response.xorRelayedAddress)
        #expect(relayed.ip == CoreFixture.relayIP)
        #expect((CoreFixture.minPort...CoreFixture.maxPort).contains(relayed.port))
        #expect(response.lifetime == 600)
        #expect(response.xorMappedAddress == CoreFixture.clientA)
        #expect(response.integrity(key: client.key) == .valid)
        #expect(response.attributeTypes.last == .messageIntegrity)

        #expect(harness.sockets.opens == 1)
        #expect(harness.sockets.descriptor(boundTo: relayed) != nil)
        let allocation = try #require(harness.allocation(of: CoreFixture.clientA))
        #expect(allocation.relayedAddress == relayed)
        #expect(allocation.expiry == CoreFixture.start + 600)
        #expect(harness.counters.allocationsCreated == 1)
        #expect(harness.admission.total == 1)
    }

    @Test("A static user (user=name:password) can allocate")
    func staticUserAllocates() throws {
        let harness = CoreHarness()
        let client = harness.client(
            at: CoreFixture.clientA, username: CoreFixture.staticUser, password: CoreFixture.staticPassword)
        let response = try client.allocate()
        #expect(response.isSuccess)
        #expect(response.integrity(key: client.key) == .valid)
    }

    @Test("Behind 1:1 NAT XOR-RELAYED-ADDRESS advertises the external-ip while the socket binds the private relay-ip")
    func externalIPIsAdvertised() throws {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.relayAddresses = [RelayAddress(bound: CoreFixture.relayIP, advertised: .literal("1.2.3.100"))]
            })
        let response = try harness.restClient(at: CoreFixture.clientA).allocate()

        let advertised = try #require(response.xorRelayedAddress)
        #expect(advertised.ip == .literal("1.2.3.100"))
        let bound = try #require(harness.sockets.bound.values.first)
        #expect(bound == TransportAddress(ip: CoreFixture.relayIP, port: advertised.port))
    }

    @Test(
        "The lifetime granted is max(600, min(requested, max-allocate-lifetime)) (RFC 8656 §7.2)",
        arguments: [
            (nil, 600), (0, 600), (1, 600), (599, 600), (601, 601), (1200, 1200), (3600, 3600), (3601, 3600),
            (UInt32.max, 3600),
        ] as [(UInt32?, UInt32)])
    func lifetimeIsClamped(requested: UInt32?, granted: UInt32) throws {
        let harness = CoreHarness()
        let response = try harness.restClient(at: CoreFixture.clientA).allocate(lifetime: requested)
        #expect(response.lifetime == granted)
        #expect(harness.allocation(of: CoreFixture.clientA)?.expiry == CoreFixture.start + Int64(granted))
    }

    @Test("A retransmitted Allocate (same transaction ID) gets a byte-identical response and no second relay socket")
    func retransmissionGetsTheSameResponse() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.challenge().errorCode == 401)

        let transactionID = TransactionID.random()
        let request = try client.signedRequest(.allocate, transactionID: transactionID) { w in
            try w.append(RequestedTransport.udp)
        }
        let first = try #require(try client.send(request))
        #expect(first.isSuccess)
        harness.advance(by: 2)
        let again = try #require(try client.send(request))
        #expect(again.bytes == first.bytes)
        #expect(harness.sockets.opens == 1)
        #expect(harness.core.allocationCount == 1)
    }

    @Test("The kept response is let go after 40 s (RFC 8489 §6.2.1): the same transaction ID then gets 437")
    func keptResponseEndsWithTheRetransmissionWindow() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.challenge().errorCode == 401)
        let request = try client.signedRequest(.allocate, transactionID: TransactionID.random()) { w in
            try w.append(RequestedTransport.udp)
        }
        let first = try #require(try client.send(request))
        #expect(first.isSuccess)
        let allocation = try #require(harness.allocation(of: CoreFixture.clientA))
        harness.advance(by: 39)
        harness.sweep()
        // Written again, not kept: the journal and a live upgrade get the same bytes.
        #expect(allocation.allocateResponse.isEmpty)
        #expect(harness.core.keptAllocateResponse(of: allocation) == first.bytes)
        #expect(try #require(try client.send(request)).bytes == first.bytes)
        harness.advance(by: 1)
        harness.sweep()
        #expect(harness.core.keptAllocateResponse(of: allocation).isEmpty)
        let late = try #require(try client.send(request))
        #expect(late.errorCode == 437)
        #expect(harness.sockets.opens == 1)
        #expect(harness.core.allocationCount == 1)
    }

    @Test(
        "A retransmission is answered with the same bytes, written again: SHA-256 keys, either integrity, FINGERPRINT, dual",
        arguments: [false, true], [false, true])
    func retransmissionWrittenAgain(dual: Bool, integritySHA256: Bool) throws {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.relayAddresses = [IPAddress.literal("10.0.0.5"), IPAddress.literal("2001:db8::5")].map(
                    RelayAddress.unmapped)
            })
        let client = harness.restClient(at: CoreFixture.clientA)
        client.fingerprint = true
        // With PASSWORD-ALGORITHM and plain MESSAGE-INTEGRITY, the answer is still SHA-256's.
        client.integrity = integritySHA256 ? .sha256 : .sha1
        #expect(try client.challenge().errorCode == 401)
        client.algorithm = .sha256
        let request = try client.signedRequest(.allocate, transactionID: .random()) { w in
            try w.append(RequestedTransport.udp)
            try w.append(Lifetime(seconds: 1200))
            if dual { try w.append(AdditionalAddressFamily(family: .ipv6)) }
        }
        let first = try #require(try client.send(request))
        #expect(first.isSuccess, "\(first)")
        #expect(first.xorRelayedAddresses.count == (dual ? 2 : 1))
        let allocation = try #require(harness.allocation(of: CoreFixture.clientA))
        #expect(allocation.allocateResponse.isEmpty)
        harness.advance(by: 5)
        #expect(try #require(try client.send(request)).bytes == first.bytes)
        #expect(harness.core.keptAllocateResponse(of: allocation) == first.bytes)
    }

    @Test("A response with a RESERVATION-TOKEN is kept as bytes, and resent as they are")
    func reservationResponseKept() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.challenge().errorCode == 401)
        let request = try client.signedRequest(.allocate, transactionID: .random()) { w in
            try w.append(RequestedTransport.udp)
            try w.append(EvenPort(reservePair: true))
        }
        let first = try #require(try client.send(request))
        #expect(first.decode(ReservationToken.self) != nil, "\(first)")
        let allocation = try #require(harness.allocation(of: CoreFixture.clientA))
        #expect(allocation.allocateResponse == first.bytes)
        harness.advance(by: 3)
        #expect(try #require(try client.send(request)).bytes == first.bytes)
        #expect(harness.sockets.opens == 1)
    }

    @Test("An Allocate with a new transaction ID on a 5-tuple that has an allocation gets 437 (RFC 8656 §7.2)")
    func secondAllocateIsMismatch() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        #expect(try client.allocate().isSuccess)
        let second = try client.allocate()
        #expect(second.errorCode == 437)
        #expect(second.integrity(key: client.key) == .valid)
        #expect(harness.sockets.opens == 1)
    }

    @Test("An Allocate without REQUESTED-TRANSPORT gets 400 (RFC 8656 §7.2)")
    func missingRequestedTransport() throws {
        let harness = CoreHarness()
        let response = try harness.restClient(at: CoreFixture.clientA).request(.allocate) { w in
            try w.append(Lifetime(seconds: 600))
        }
        #expect(response.errorCode == 400)
        #expect(harness.sockets.opens == 0)
        #expect(harness.admission.total == 0)
    }

    @Test(
        "REQUESTED-TRANSPORT other than UDP (17) and TCP (6, RFC 6062: CoreTCPRelayTests) gets 442 (RFC 8656 §7.2)",
        arguments: (0...255).map(UInt8.init).filter { $0 != 17 && $0 != 6 })
    func unsupportedTransport(protocolNumber: UInt8) throws {
        let harness = CoreHarness()
        let response = try harness.restClient(at: CoreFixture.clientA).request(.allocate) { w in
            try w.append(RequestedTransport(protocolNumber: protocolNumber))
        }
        #expect(response.errorCode == 442)
        #expect(harness.sockets.opens == 0)
        #expect(harness.admission.total == 0)
    }

    @Test("REQUESTED-ADDRESS-FAMILY IPv6 without an IPv6 relay address gets 440 (RFC 6156 §4.2)")
    func ipv6WithoutIPv6Relay() throws {
        let harness = CoreHarness()
        let response = try harness.restClient(at: CoreFixture.clientA).allocate { w in
            try w.append(RequestedAddressFamily(family: .ipv6))
        }
        #expect(response.errorCode == 440)
        #expect(harness.admission.total == 0)
    }

    @Test(
        "A REQUESTED-ADDRESS-FAMILY of an unknown family gets 440; one of the wrong length is malformed, 400 (RFC 8656 §7.2)",
        arguments: [([0x03, 0, 0, 0], 440), ([0x00, 0, 0, 0], 440), ([0x01], 400), ([], 400)] as [([UInt8], Int)])
    func badAddressFamily(value: [UInt8], code: Int) throws {
        let harness = CoreHarness()
        let response = try harness.restClient(at: CoreFixture.clientA).request(.allocate) { w in
            try w.append(RequestedTransport.udp)
            try value.withUnsafeBytes { try w.append(.requestedAddressFamily, value: $0) }
        }
        #expect(response.errorCode == code)
        #expect(harness.admission.total == 0)
    }

    @Test("REQUESTED-ADDRESS-FAMILY IPv6 with an IPv6 relay address gets an IPv6 XOR-RELAYED-ADDRESS")
    func ipv6Allocation() throws {
        let relay6 = IPAddress.literal("2001:db8::5")
        let harness = CoreHarness(
            options: CoreFixture.options { $0.relayAddresses = [.unmapped(CoreFixture.relayIP), .unmapped(relay6)] })
        let response = try harness.restClient(at: CoreFixture.clientA).allocate { w in
            try w.append(RequestedAddressFamily(family: .ipv6))
        }
        #expect(response.isSuccess)
        #expect(response.xorRelayedAddress?.ip == relay6)
    }

    @Test(
        "A comprehension-required attribute the server does not know gets 420 listing it in UNKNOWN-ATTRIBUTES (RFC 8489 §6.3.1)"
    )
    func unknownComprehensionRequired() throws {
        let harness = CoreHarness()
        let unknown = AttributeType(rawValue: 0x7F00)
        let response = try harness.restClient(at: CoreFixture.clientA).allocate { w in
            try w.append(unknown, value: UnsafeRawBufferPointer(start: nil, count: 0))
        }
        #expect(response.errorCode == 420)
        #expect(response.unknownAttributes == [unknown])
        #expect(harness.sockets.opens == 0)
    }

    @Test("An unknown comprehension-optional attribute is ignored (RFC 8489 §6.3)")
    func unknownComprehensionOptional() throws {
        let harness = CoreHarness()
        let response = try harness.restClient(at: CoreFixture.clientA).allocate { w in
            try w.append(AttributeType(rawValue: 0xC0DE), value: UnsafeRawBufferPointer(start: nil, count: 0))
        }
        #expect(response.isSuccess)
    }

    @Test("Attributes after MESSAGE-INTEGRITY are ignored, even comprehension-required ones (RFC 8489 §14.5)")
    func attributesAfterIntegrityAreIgnored() throws {
        let harness = CoreHarness()
        let client = harness.restClient(at: CoreFixture.clientA)
        try client.challenge()
        let request = try StunTestMessages.build(
            MessageType(method: .allocate, messageClass: .request), signature: client.signature,
            { w in try w.append(RequestedTransport.udp) },
            afterIntegrity: { w in
                try w.append(AttributeType(rawValue: 0x7F00), value: UnsafeRawBufferPointer(start: nil, count: 0))
            })
        let response = try #require(try client.send(request))
        #expect(response.isSuccess)
    }
}
