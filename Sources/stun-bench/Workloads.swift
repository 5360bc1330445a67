import StunCodec

/// The inputs of the three benchmarks, built once before timing, in buffers that live as long
/// as the process.
struct Fixture {
    /// An RFC 5769 §2.1-style Binding request: SOFTWARE, PRIORITY, ICE-CONTROLLED, USERNAME,
    /// MESSAGE-INTEGRITY, FINGERPRINT.
    let request: UnsafeRawBufferPointer
    /// The RFC 5769 short-term password, in its own buffer as a server would hold a key.
    let key: UnsafeRawBufferPointer
    /// A ChannelData message on channel 0x4001 with 100 bytes of data (RFC 8656 §12.4).
    let channelData: UnsafeRawBufferPointer
    /// Where the Binding success response is written.
    let response: UnsafeMutableRawBufferPointer
    /// The reflexive address the response reports.
    let mapped = TransportAddress(ip: IPAddress(ipv4: 0xC000_0201), port: 32853)

    static let transactionID = TransactionID(high: 0xB7E7_A701, low: 0xBC34_D686_FA87_DFAE)

    init() throws {
        let key = UnsafeMutableRawBufferPointer.allocate(byteCount: 22, alignment: 8)
        key.copyBytes(from: "VOkJxbRl1RmTxUk/WvJxBt".utf8)
        self.key = UnsafeRawBufferPointer(key)

        let request = UnsafeMutableRawBufferPointer.allocate(byteCount: 512, alignment: 8)
        var writer = try StunMessageWriter(into: request, type: .bindingRequest, transactionID: Self.transactionID)
        try writer.append(Software(value: "STUN test client"))
        try writer.append(Priority(value: 0x6E00_01FF))
        try writer.append(ICEControlled(tieBreaker: 0x932F_F9B1_5126_3B36))
        try writer.append(Username(value: "evtj:h6vY"))
        try writer.appendMessageIntegrity(key: self.key)
        try writer.appendFingerprint()
        self.request = writer.bytes

        let channelData = UnsafeMutableRawBufferPointer.allocate(byteCount: 104, alignment: 8)
        ChannelDataMessage.writeHeader(into: channelData, channelNumber: 0x4001, length: 100)
        for i in 4..<104 { channelData[i] = UInt8(truncatingIfNeeded: i) }
        self.channelData = UnsafeRawBufferPointer(channelData)

        response = UnsafeMutableRawBufferPointer.allocate(byteCount: 512, alignment: 8)
    }

    /// Checks once, outside timing, that the workloads do what their names say.
    func validate() throws {
        let message = try StunMessage(parsing: request)
        guard message.fingerprintOffset != nil, message.verifyIntegrity(key: key) == .valid,
            message.attribute(.username) != nil
        else { throw BenchError.invalidFixture("Binding request") }
        let channel = try ChannelDataMessage(parsing: channelData)
        guard channel.channelNumber == 0x4001, channel.data.count == 100 else {
            throw BenchError.invalidFixture("ChannelData")
        }
        _ = buildBindingSuccess(self, iterations: 1)
        let length = 20 + Int(response.loadUnaligned(fromByteOffset: 2, as: UInt16.self).bigEndian)
        let written = try StunMessage(parsing: UnsafeRawBufferPointer(rebasing: response[0..<length]))
        guard written.verifyIntegrity(key: key) == .valid,
            try written.decode(XORMappedAddress.self)?.address == mapped
        else { throw BenchError.invalidFixture("Binding success response") }
    }
}

enum BenchError: Error {
    case invalidFixture(String)
}

/// (a) What a server does with each Binding request: parse and index it, which checks
/// FINGERPRINT (RFC 8489 §14.7), then verify MESSAGE-INTEGRITY (§14.5). Returns a checksum.
@inline(never)
func parseAndVerifyRequest(_ fixture: Fixture, iterations: Int) -> UInt64 {
    var sum: UInt64 = 0
    for _ in 0..<iterations {
        let bytes = opaque(fixture.request)
        guard let message = try? StunMessage(parsing: bytes), message.verifyIntegrity(key: fixture.key) == .valid
        else { fatalError("benchmark request no longer verifies") }
        sum &+= UInt64(message.trustedEnd)
    }
    return sum
}

/// (b) The relay's hot path from a client: recognise a ChannelData datagram (RFC 8656 §12.4).
@inline(never)
func parseChannelData(_ fixture: Fixture, iterations: Int) -> UInt64 {
    var sum: UInt64 = 0
    for _ in 0..<iterations {
        let bytes = opaque(fixture.channelData)
        guard let message = try? ChannelDataMessage(parsing: bytes) else {
            fatalError("benchmark ChannelData no longer parses")
        }
        sum &+= UInt64(message.channelNumber) &+ UInt64(message.data.count) &+ UInt64(message.data[99])
    }
    return sum
}

/// (c) Answer a Binding request: XOR-MAPPED-ADDRESS, MESSAGE-INTEGRITY, FINGERPRINT written
/// into a preallocated buffer, a new transaction ID each time. Returns a checksum.
@inline(never)
func buildBindingSuccess(_ fixture: Fixture, iterations: Int) -> UInt64 {
    var sum: UInt64 = 0
    let buffer = opaque(fixture.response)
    for i in 0..<iterations {
        let id = TransactionID(high: UInt32(truncatingIfNeeded: i), low: 0x0123_4567_89AB_CDEF)
        do {
            var writer = try StunMessageWriter(into: buffer, type: .bindingSuccess, transactionID: id)
            try writer.append(XORMappedAddress(address: fixture.mapped))
            try writer.appendMessageIntegrity(key: fixture.key)
            try writer.appendFingerprint()
            sum = UInt64(writer.count) | UInt64(buffer[writer.count - 1]) << 32
        } catch {
            fatalError("benchmark response no longer fits: \(error)")
        }
    }
    return sum
}

/// Hides a value from the optimizer so that work on it is not hoisted out of the loop.
@inline(never) @_optimize(none)
func opaque(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer { bytes }

@inline(never) @_optimize(none)
func opaque(_ bytes: UnsafeMutableRawBufferPointer) -> UnsafeMutableRawBufferPointer { bytes }

@inline(never) @_optimize(none)
func opaque(_ pointer: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer { pointer }

@inline(never) @_optimize(none)
func blackHole(_ value: UInt64) {}
