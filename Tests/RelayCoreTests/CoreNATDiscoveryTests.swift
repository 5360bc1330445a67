import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// NAT behaviour discovery on Binding (RFC 5780 §6.1, docs/nat-discovery.md) and RFC 3489
/// classic Binding requests, with the loop listening on two IPs and two ports.
@Suite struct CoreNATDiscoveryTests {
    static let second = IPAddress("10.0.0.6")!
    static let altPort: UInt16 = 3479

    /// A harness whose loop also listens on 10.0.0.5:3479, 10.0.0.6:3478 and 10.0.0.6:3479.
    static func harness(rfc5780: Bool = true, classic: Bool = true) -> (CoreHarness, [TransportAddress: ClientSocket]) {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.settings.rfc5780 = rfc5780
                $0.settings.rfc3489Compatibility = classic
                $0.unauthRateLimit = 2
                $0.unauthRateBurst = 3
            })
        var sockets = [CoreFixture.server: harness.listenerSocket]
        for (i, address) in [
            TransportAddress(ip: CoreFixture.server.ip, port: altPort), TransportAddress(ip: second, port: 3478),
            TransportAddress(ip: second, port: altPort),
        ].enumerated() {
            let socket = ClientSocket(descriptor: 900 + Int32(i))
            harness.core.addUDPListener(address, socket: socket)
            sockets[address] = socket
        }
        return (harness, sockets)
    }

    static func binding(_ body: @escaping StunBody = { _ in }) throws -> [UInt8] {
        try StunTestMessages.request(.binding, body)
    }

    static func origin(of packet: SentPacket) -> ClientOrigin? {
        if case .client(let o) = packet.route { return o }
        return nil
    }

    @Test("A Binding response carries MAPPED-ADDRESS, RESPONSE-ORIGIN and OTHER-ADDRESS (Ca:Cp)")
    func attributes() throws {
        let (harness, _) = Self.harness()
        let sent = harness.receive(try Self.binding(), from: CoreFixture.clientA)
        let response = try ReceivedStun(try #require(sent.first).bytes)
        #expect(response.xorMappedAddress == CoreFixture.clientA)
        #expect(response.decode(MappedAddress.self)?.address == CoreFixture.clientA)
        #expect(response.decode(ResponseOrigin.self)?.address == CoreFixture.server)
        #expect(response.decode(OtherAddress.self)?.address == TransportAddress(ip: Self.second, port: Self.altPort))
    }

    @Test(
        "CHANGE-REQUEST answers from the address of RFC 5780 Table 1, to the requester",
        arguments: [(true, false), (false, true), (true, true), (false, false)])
    func changeRequest(changeIP: Bool, changePort: Bool) throws {
        let (harness, sockets) = Self.harness()
        let sent = harness.receive(
            try Self.binding { try $0.append(ChangeRequest(changeIP: changeIP, changePort: changePort)) },
            from: CoreFixture.clientA)
        let packet = try #require(sent.first)
        let origin = try #require(Self.origin(of: packet))
        let expected = TransportAddress(
            ip: changeIP ? Self.second : CoreFixture.server.ip, port: changePort ? Self.altPort : CoreFixture.server.port)
        #expect(origin.fiveTuple.server == expected && origin.socket == sockets[expected])
        #expect(origin.fiveTuple.client == CoreFixture.clientA)
        #expect(try ReceivedStun(packet.bytes).decode(ResponseOrigin.self)?.address == expected)
    }

    @Test("RESPONSE-PORT changes only the port; with PADDING it is 400; over TCP the attributes are 400")
    func responsePortAndPadding() throws {
        let (harness, _) = Self.harness()
        let sent = harness.receive(try Self.binding { try $0.append(ResponsePort(port: 5555)) }, from: CoreFixture.clientA)
        let first = try #require(sent.first)
        let origin = try #require(Self.origin(of: first))
        #expect(origin.fiveTuple.client == TransportAddress(ip: CoreFixture.clientA.ip, port: 5555))
        let both = harness.receive(
            try Self.binding {
                try $0.append(ResponsePort(port: 5555))
                try $0.append(Padding(count: 64))
            }, from: CoreFixture.clientA)
        #expect(try ReceivedStun(try #require(both.first).bytes).errorCode == 400)
        let tcp = harness.receive(
            try Self.binding { try $0.append(ChangeRequest(changeIP: true, changePort: false)) },
            from: CoreFixture.clientA, transport: .tcp)
        #expect(try ReceivedStun(try #require(tcp.first).bytes).errorCode == 400)
    }

    @Test("PADDING makes the response as large as the request, never larger", arguments: [8, 200, 1400])
    func padding(size: Int) throws {
        let (harness, _) = Self.harness()
        let request = try Self.binding { try $0.append(Padding(count: size)) }
        let response = try #require(harness.receive(request, from: CoreFixture.clientA).first).bytes
        #expect(response.count <= max(request.count, 100))
        if size >= 200 { #expect(response.count > request.count - 8) }
        #expect(try ReceivedStun(response).isSuccess)
    }

    @Test("Without rfc5780: CHANGE-REQUEST with a flag, PADDING and RESPONSE-PORT get 420; empty flags are a plain Binding")
    func disabled() throws {
        let (harness, _) = Self.harness(rfc5780: false)
        let refusedPacket = harness.receive(
            try Self.binding { try $0.append(ChangeRequest(changeIP: true, changePort: false)) },
            from: CoreFixture.clientA
        ).first
        let refused = try ReceivedStun(try #require(refusedPacket).bytes)
        #expect(refused.errorCode == 420)
        #expect(refused.decode(UnknownAttributes.self)?.types == [.changeRequest])
        let plainPacket = harness.receive(
            try Self.binding { try $0.append(ChangeRequest(changeIP: false, changePort: false)) },
            from: CoreFixture.clientA
        ).first
        let plain = try ReceivedStun(try #require(plainPacket).bytes)
        #expect(plain.isSuccess && !plain.contains(.otherAddress) && !plain.contains(.responseOrigin))
    }

    @Test("Answers from another address or port are rate-limited per source IP (unauth-rate-limit)")
    func rateLimited() throws {
        let (harness, _) = Self.harness()
        var answered = 0
        for _ in 0..<10 {
            answered +=
                harness.receive(
                    try Self.binding { try $0.append(ChangeRequest(changeIP: true, changePort: true)) },
                    from: CoreFixture.clientA
                ).count
        }
        #expect(answered == 3)
        #expect(harness.counters.dropped(.rateLimited) == 7)
        // Another source has its own bucket.
        #expect(harness.receive(try Self.binding(), from: CoreFixture.clientB).count == 1)
    }

    @Test("With rfc5780 a plain Binding answer (3.5 times its request) is rate-limited per source too; without, never")
    func plainBindingRateLimitedWithDiscovery() throws {
        for rfc5780 in [true, false] {
            let (harness, _) = Self.harness(rfc5780: rfc5780)
            var answered = 0
            for _ in 0..<10 { answered += harness.receive(try Self.binding(), from: CoreFixture.clientA).count }
            #expect(answered == (rfc5780 ? 3 : 10))
            #expect(harness.counters.dropped(.rateLimited) == (rfc5780 ? 7 : 0))
            // Over TCP the handshake proves the source: not limited.
            let stream = harness.receive(try Self.binding(), from: CoreFixture.clientA, transport: .tcp)
            #expect(stream.count == 1)
        }
    }

    @Test("An RFC 3489 request gets MAPPED-ADDRESS, SOURCE-ADDRESS, CHANGED-ADDRESS and its 16-byte ID back")
    func classic() throws {
        let (harness, sockets) = Self.harness()
        let id: [UInt8] = Array(0..<16)
        // CHANGE-REQUEST (change IP) and RESPONSE-ADDRESS (0x0002) naming a third party.
        let attributes: [UInt8] = [0, 3, 0, 4, 0, 0, 0, 4] + [0, 2, 0, 8, 0, 1, 0, 9, 203, 0, 113, 1]
        let request: [UInt8] = [0, 1, 0, UInt8(attributes.count)] + id + attributes
        let sent = harness.receive(request, from: CoreFixture.clientA)
        let packet = try #require(sent.first)
        let origin = try #require(Self.origin(of: packet))
        let source = TransportAddress(ip: Self.second, port: CoreFixture.server.port)
        #expect(origin.fiveTuple.client == CoreFixture.clientA)
        #expect(origin.fiveTuple.server == source && origin.socket == sockets[source])
        #expect(Array(packet.bytes[0..<2]) == [0x01, 0x01] && Array(packet.bytes[4..<20]) == id)
        // MAPPED-ADDRESS 192.0.2.1:40001, SOURCE-ADDRESS 10.0.0.6:3478, CHANGED-ADDRESS 10.0.0.6:3479.
        let body = Array(packet.bytes[20...])
        #expect(body == [0, 1, 0, 8, 0, 1, 0x9C, 0x41, 192, 0, 2, 1] + [0, 4, 0, 8, 0, 1, 0x0D, 0x96, 10, 0, 0, 6]
            + [0, 5, 0, 8, 0, 1, 0x0D, 0x97, 10, 0, 0, 6])
        // Without rfc3489-compatibility, the same bytes are a counted drop.
        let (off, _) = Self.harness(classic: false)
        #expect(off.receive(request, from: CoreFixture.clientA).isEmpty)
        #expect(off.counters.dropped(.malformed) == 1)
    }

    @Test("Malformed RFC 3489 requests are counted drops", arguments: [
        [0, 1, 0, 4] + Array(repeating: UInt8(7), count: 16),
        [0, 1, 0, 8] + Array(repeating: UInt8(7), count: 16) + [0, 3, 0, 8, 0, 0, 0, 4],
        [0, 1, 0, 8] + Array(repeating: UInt8(7), count: 16) + [0, 3, 0, 2, 0, 0, 0, 0],
        [0, 3, 0, 0] + Array(repeating: UInt8(7), count: 16),
    ] as [[UInt8]])
    func classicMalformed(bytes: [UInt8]) {
        let (harness, _) = Self.harness()
        #expect(harness.receive(bytes, from: CoreFixture.clientA).isEmpty)
        #expect(harness.counters.dropped(.malformed) == 1)
    }

    @Test("Over TCP a Binding gets MAPPED-ADDRESS and RESPONSE-ORIGIN, and no OTHER-ADDRESS (nothing to change)")
    func overTCP() throws {
        let (harness, _) = Self.harness()
        let sent = harness.receive(try Self.binding(), from: CoreFixture.clientA, transport: .tcp)
        let response = try ReceivedStun(try #require(sent.first).bytes)
        #expect(response.decode(MappedAddress.self)?.address == CoreFixture.clientA)
        #expect(response.decode(ResponseOrigin.self)?.address == CoreFixture.server)
        #expect(!response.contains(.otherAddress))
    }

    @Test("A loopback listener is never the alternate of another address, nor a wildcard one")
    func scopes() {
        let socket = ClientSocket(descriptor: 9)
        let mixed: [(address: TransportAddress, socket: ClientSocket)] = [
            ("10.0.0.5:3478", socket), ("10.0.0.5:3479", socket), ("127.0.0.1:3478", socket),
            ("127.0.0.1:3479", socket), ("0.0.0.0:3478", socket), ("0.0.0.0:3479", socket),
        ].map { (TransportAddress.literal($0.0), $0.1) }
        #expect(BehaviourDiscovery(received: .literal("10.0.0.5:3478"), listeners: mixed) == nil)
        #expect(BehaviourDiscovery(received: .literal("0.0.0.0:3478"), listeners: mixed) == nil)
        let pair = mixed + [(TransportAddress.literal("10.0.0.6:3478"), socket), (.literal("10.0.0.6:3479"), socket)]
        #expect(BehaviourDiscovery(received: .literal("10.0.0.5:3478"), listeners: pair)?.other == .literal("10.0.0.6:3479"))
    }

    @Test("A classic change request without an alternate address is dropped and counted, not answered")
    func classicWithoutAlternate() {
        let harness = CoreHarness(
            options: CoreFixture.options {
                $0.settings.rfc5780 = true
                $0.settings.rfc3489Compatibility = true
            })
        let request: [UInt8] = [0, 1, 0, 8] + Array(repeating: UInt8(3), count: 16) + [0, 3, 0, 4, 0, 0, 0, 6]
        #expect(harness.receive(request, from: CoreFixture.clientA).isEmpty)
        #expect(harness.counters.dropped(.unexpectedMessage) == 1)
        let plain: [UInt8] = [0, 1, 0, 0] + Array(repeating: UInt8(3), count: 16)
        #expect(harness.receive(plain, from: CoreFixture.clientA).count == 1)
    }
}
