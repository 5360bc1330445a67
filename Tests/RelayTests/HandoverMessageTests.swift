import Glibc
import RelayCore
import StunCodec
import Testing

@testable import Relay

/// The live upgrade's messages (docs/live-upgrade.md, "How the handover runs"): each reads back
/// as written, and anything cut short, padded, or of an unknown kind is refused, never trapped on.
@Suite struct HandoverMessageTests {
    private func decode(_ bytes: [UInt8]) throws -> HandoverMessage {
        try bytes.withUnsafeBytes { raw in try HandoverMessage(decoding: raw) }
    }

    @Test("Every message reads back as written")
    func roundTrip() throws {
        let v4 = TransportAddress(ip: IPAddress("192.0.2.7")!, port: 3478)
        let v6 = TransportAddress(ip: IPAddress("2001:db8::1")!, port: 49152)
        let messages: [HandoverMessage] = [
            .hello(version: HandoverMessage.version, pid: 4242),
            .sockets([
                HandoverSocket(kind: .udpListener, loop: 1, address: v4),
                HandoverSocket(kind: .tlsListener, loop: 0, address: v6),
                HandoverSocket(kind: .relayAdditional, session: 0xDEAD_BEEF_0102_0304, address: v6),
                HandoverSocket(kind: .bpfMap, session: 8, address: HandoverSocket.noAddress),
                HandoverSocket(kind: .bpfLink, session: 1, address: HandoverSocket.noAddress),
                HandoverSocket(kind: .bpfXDPLink, session: 2, address: HandoverSocket.noAddress),
                HandoverSocket(kind: .tcpClient, loop: 1, session: 12, address: v4),
            ]),
            .sockets([]),
            .state([0x89, 0x52, 0x4C, 0x4A]),
            .state([]),
            .blocks([.init(user: "mallory", until: 1_900_000_000), .init(user: "ユーザー", until: 0)]),
            .blocks([]),
            .counters(Array("relayd_allocations_created_total 3\n".utf8)),
            .counters([]),
            .stream(
                HandoverStream(
                    id: 17, loop: 1, client: v4, server: TransportAddress(ip: IPAddress("192.0.2.1")!, port: 3478),
                    session: 0xFEED, input: [0x40, 0x00, 0x00, 0x10, 1], output: Array(repeating: 7, count: 300))),
            .stream(HandoverStream(id: 3, loop: 0, client: v6, server: v6, session: 0, input: [], output: [])),
            .stream(
                HandoverStream(
                    id: 4, loop: 1, client: v4, server: v4, session: 0xBEEF, input: [0x00, 0x01], output: [23, 3, 3, 0, 17],
                    tls: HandoverTLSSession(records: Array(repeating: 5, count: 134), tenant: "acme"))),
            .stream(
                HandoverStream(
                    id: 5, loop: 0, client: v6, server: v6, session: 0, input: [], output: [],
                    tls: HandoverTLSSession(records: [1], tenant: ""))),
            .tcpRelay(Self.tcpRelay),
            .tcpRelay(TCPRelaySnapshot(session: 1, bytesToPeer: 0, bytesToClient: 0, connections: [])),
            .pipe(
                HandoverPipe(
                    id: PeerConnectionID(77), loop: 1, client: v4, server: v4, session: 9, peer: v6,
                    toPeer: [1, 2, 3], unpaid: 2, toClient: Array(repeating: 9, count: 1000))),
            .limiters(
                .challenges,
                [
                    HandoverLimiterEntry(source: v4.ip, tokens: 1.5),
                    HandoverLimiterEntry(source: v6.ip, milliTokens: 0),
                ]),
            .limiters(.allocations, []),
            .done(sockets: 253, stateBytes: 61_440, blocks: 2),
            .ready(pid: 77),
            .failed("the configuration is invalid"),
        ]
        for message in messages {
            #expect(try decode(message.encoded()) == message)
        }
    }

    static let tcpRelay = TCPRelaySnapshot(
        session: 9, bytesToPeer: 1 << 40, bytesToClient: 3,
        connections: [
            .init(id: PeerConnectionID(1), peer: TransportAddress(ip: IPAddress("192.0.2.4")!, port: 80), deadline: 99, state: .ready),
            .init(
                id: PeerConnectionID(2), peer: TransportAddress(ip: IPAddress("2001:db8::2")!, port: 443), deadline: 100,
                state: .piped(loop: 1)),
            .init(
                id: PeerConnectionID(3), peer: TransportAddress(ip: IPAddress("192.0.2.5")!, port: 80), deadline: 101,
                state: .connecting(nil)),
            .init(
                id: PeerConnectionID(4), peer: TransportAddress(ip: IPAddress("192.0.2.6")!, port: 80), deadline: 102,
                state: .connecting(
                    .init(
                        method: 0x00A, transactionID: TransactionID(high: 1, low: 2), fingerprinted: true,
                        key: IntegrityKey(bytes: Array(repeating: 7, count: 32), sha256: true)))),
        ])

    @Test("An RFC 6062 pipe holding more than a message goes in pieces and is put together again")
    func pipePieces() throws {
        let v4 = TransportAddress(ip: IPAddress("192.0.2.7")!, port: 3478)
        let pipe = HandoverPipe(
            id: PeerConnectionID(5), loop: 0, client: v4, server: v4, session: 3, peer: v4,
            toPeer: (0..<150_000).map { UInt8(truncatingIfNeeded: $0) }, unpaid: 10,
            toClient: (0..<90_000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let pieces = pipe.pieces()
        #expect(pieces.count == 5)
        var whole: HandoverPipe? = nil
        for piece in pieces {
            let encoded = HandoverMessage.pipe(piece).encoded()
            #expect(encoded.count <= HandoverMessage.maxBytes)
            guard case .pipe(let read) = try decode(encoded) else {
                Issue.record("not a pipe")
                return
            }
            if whole == nil {
                whole = read
            } else {
                let added = whole!.append(read)
                #expect(added)
            }
        }
        #expect(whole == pipe)
        // A piece of another pipe, or one with another header, is not added.
        var other = pieces[1]
        other.id = PeerConnectionID(6)
        var added = whole!.append(other)
        #expect(!added)
        other = pieces[1]
        other.unpaid = 11
        added = whole!.append(other)
        #expect(!added)
        // An empty pipe is one piece.
        var empty = pipe
        empty.toPeer = []
        empty.toClient = []
        #expect(empty.pieces() == [empty])
        // A Connect's key of the wrong length for its algorithm is refused.
        var bad = HandoverMessage.tcpRelay(Self.tcpRelay).encoded()
        let keyLength = bad.count - 33
        #expect(bad[keyLength] == 32)
        bad[keyLength] = 16
        bad.removeLast(16)
        #expect(throws: HandoverMessage.DecodingError.self) { try decode(bad) }
        // A deadline no monotonic clock reaches is refused, not computed with.
        var late = Self.tcpRelay
        late.connections[0].deadline = Int64.min
        #expect(throws: HandoverMessage.DecodingError.self) { try decode(HandoverMessage.tcpRelay(late).encoded()) }
    }

    @Test("A message cut short or padded is refused")
    func cutShort() {
        let full = HandoverMessage.sockets([
            HandoverSocket(kind: .relayMain, session: 9, address: TransportAddress(ip: IPAddress("10.0.0.1")!, port: 5000))
        ]).encoded()
        for length in 0..<full.count {
            #expect(throws: (any Error).self, "cut at \(length)") { try decode(Array(full.prefix(length))) }
        }
        #expect(throws: (any Error).self) { try decode(full + [0]) }
        #expect(throws: (any Error).self) { try decode(HandoverMessage.ready(pid: 1).encoded() + [0, 0]) }
    }

    @Test("Unknown tags, socket kinds and address families are refused")
    func unknown() throws {
        #expect(throws: (any Error).self) { try decode([0]) }
        #expect(throws: (any Error).self) { try decode([99, 0, 0]) }
        // One socket of kind 0, then of family 5.
        #expect(throws: (any Error).self) { try decode([2, 0, 1, 0, 0, 0] + [UInt8](repeating: 0, count: 8) + [4, 1, 2, 3, 4, 0, 1]) }
        #expect(throws: (any Error).self) { try decode([2, 0, 1, 1, 0, 0] + [UInt8](repeating: 0, count: 8) + [5, 1, 2, 3, 4, 0, 1]) }
        // More sockets than one message may carry descriptors for.
        #expect(throws: (any Error).self) { try decode([2, 0x01, 0x00]) }
        // A limiter of kind 9; a limiter source with a port; too many entries.
        let limiters = HandoverMessage.Tag.limiters.rawValue
        #expect(throws: (any Error).self) { try decode([limiters, 9, 0, 0]) }
        #expect(throws: (any Error).self) { try decode([limiters, 1, 0, 1, 4, 1, 2, 3, 4, 0, 1, 0, 0, 0, 0]) }
        #expect(throws: (any Error).self) { try decode([limiters, 1, 0xFF, 0xFF]) }
        #expect(try decode([limiters, 1, 0, 1, 4, 1, 2, 3, 4, 0, 0, 0, 0, 3, 0xE8]) == .limiters(.challenges, [
            HandoverLimiterEntry(source: IPAddress("1.2.3.4")!, tokens: 1)
        ]))
    }

    @Test("Descriptors travel with their message, close-on-exec")
    func descriptors() throws {
        let (running, heirEnd) = try HandoverChannel.pair()
        let heir = HandoverChannel(fd: heirEnd)
        var pipe: [Int32] = [-1, -1]
        #expect(Glibc.pipe(&pipe) == 0)
        let address = TransportAddress(ip: IPAddress("127.0.0.1")!, port: 1)
        try running.send(.sockets([HandoverSocket(kind: .httpListener, address: address)]), descriptors: [pipe[1]])
        close(pipe[1])
        let (message, descriptors) = try heir.receive(until: HandoverChannel.monotonicMillis() + 2000)
        #expect(message == .sockets([HandoverSocket(kind: .httpListener, address: address)]))
        try #require(descriptors.count == 1)
        // The received descriptor is the pipe's write end: what goes in comes out of the read end.
        var byte: UInt8 = 0x5A
        #expect(write(descriptors[0], &byte, 1) == 1)
        byte = 0
        #expect(read(pipe[0], &byte, 1) == 1)
        #expect(byte == 0x5A)
        #expect(fcntl(descriptors[0], F_GETFD) & FD_CLOEXEC != 0, "received close-on-exec")
        close(descriptors[0])
        close(pipe[0])
        withExtendedLifetime(running) {}
    }

    @Test("The other side gone ends the wait at once")
    func otherSideGone() throws {
        var (running, heirEnd): (HandoverChannel?, Int32) = try HandoverChannel.pair()
        let heir = HandoverChannel(fd: heirEnd)
        running = nil
        let start = HandoverChannel.monotonicMillis()
        let error = #expect(throws: HandoverChannel.Failure.self) { try heir.receive(until: start + 5000) }
        #expect(error?.description == "the other side closed")
        #expect(HandoverChannel.monotonicMillis() - start < 4000)
        #expect(running == nil)
    }

    @Test("A wait ends at its deadline")
    func deadline() throws {
        let (running, heirEnd) = try HandoverChannel.pair()
        let heir = HandoverChannel(fd: heirEnd)
        let start = HandoverChannel.monotonicMillis()
        #expect(throws: HandoverChannel.Failure.self) { try heir.receive(until: start + 100) }
        #expect(HandoverChannel.monotonicMillis() - start >= 100)
        withExtendedLifetime(running) {}
    }

    @Test("A TCP connection's state longer than a connection may hand over is refused")
    func streamBounds() throws {
        let v4 = TransportAddress(ip: IPAddress("192.0.2.7")!, port: 3478)
        let big = HandoverStream(
            id: 1, loop: 0, client: v4, server: v4, session: 0, input: Array(repeating: 1, count: 100),
            output: Array(repeating: 2, count: HandoverStream.maxBytes - 99))
        #expect(throws: HandoverMessage.DecodingError.self) { try decode(HandoverMessage.stream(big).encoded()) }
        var fits = big
        fits.output.removeLast()
        #expect(try decode(HandoverMessage.stream(fits).encoded()) == .stream(fits))
    }

    @Test("An heir says hello with the running relayd's version when that is older, 3 when it names none")
    func helloVersion() {
        #expect(HandoverMessage.helloVersion(predecessor: nil) == 3)
        #expect(HandoverMessage.helloVersion(predecessor: "x") == 3)
        #expect(HandoverMessage.helloVersion(predecessor: "0") == 3)
        #expect(HandoverMessage.helloVersion(predecessor: "2") == 2)
        #expect(HandoverMessage.helloVersion(predecessor: "\(HandoverMessage.version)") == HandoverMessage.version)
        #expect(HandoverMessage.helloVersion(predecessor: "\(HandoverMessage.version + 5)") == HandoverMessage.version)
    }

    @Test("A TLS connection's records count against the same bound, and are never empty")
    func tlsStreamBounds() throws {
        let v4 = TransportAddress(ip: IPAddress("192.0.2.7")!, port: 3478)
        var stream = HandoverStream(
            id: 1, loop: 0, client: v4, server: v4, session: 0, input: [],
            output: Array(repeating: 2, count: HandoverStream.maxBytes - 200),
            tls: HandoverTLSSession(records: Array(repeating: 1, count: 201), tenant: "t"))
        #expect(stream.fiveTuple.transport == .tls)
        #expect(throws: HandoverMessage.DecodingError.self) { try decode(HandoverMessage.stream(stream).encoded()) }
        stream.tls?.records = SecretBytes(Array(repeating: 1, count: 200))
        #expect(try decode(HandoverMessage.stream(stream).encoded()) == .stream(stream))
        stream.tls?.records = SecretBytes([])
        #expect(throws: HandoverMessage.DecodingError.self) { try decode(HandoverMessage.stream(stream).encoded()) }
        // A TCP stream's message followed by bytes is refused, not read as a TLS one.
        var tcp = HandoverMessage.stream(HandoverStream(id: 1, loop: 0, client: v4, server: v4, session: 0, input: [], output: [])).encoded()
        tcp += [0, 0, 0, 0, 1, 9]
        #expect(throws: HandoverMessage.DecodingError.self) { try decode(tcp) }
    }

    @Test("TLS secrets are read back whole, and a stream message never outgrows its first buffer")
    func secretBytes() {
        let bytes: [UInt8] = (0..<48).map { UInt8($0) }
        let secret = SecretBytes(bytes)
        #expect(secret.withUnsafeBytes { Array($0) } == bytes)
        // The largest TLS stream message is written into the buffer reserved at the start.
        let v4 = TransportAddress(ip: IPAddress("192.0.2.7")!, port: 3478)
        let largest = HandoverStream(
            id: 1, loop: 0, client: v4, server: v4, session: 0, input: [],
            output: Array(repeating: 2, count: HandoverStream.maxBytes - 200),
            tls: HandoverTLSSession(records: Array(repeating: 1, count: 200), tenant: "t"))
        let encoded = HandoverMessage.stream(largest).encoded()
        #expect(encoded.count <= HandoverMessage.maxBytes && encoded.capacity >= HandoverMessage.maxBytes)
        let part = bytes.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<16])) }
        #expect(part.withUnsafeBytes { Array($0) } == Array(bytes[0..<16]))
        #expect(SecretBytes([]).isEmpty)
        #expect(SecretBytes(bytes) == secret && SecretBytes([1]) != secret)
        var buffer = bytes
        buffer.withUnsafeMutableBytes { SecretBytes.wipe($0) }
        #expect(buffer.allSatisfy { $0 == 0 })
    }
}

extension HandoverTLSSession {
    /// Tests' shorthand: records from an array (production code exports into `SecretBytes`).
    init(records: [UInt8], tenant: String) {
        self.init(records: SecretBytes(records), tenant: tenant)
    }
}
