import RelayCore
import StunCodec

/// A TCP or TLS client's connection as a live upgrade hands it over (docs/live-upgrade.md,
/// "TCP clients", "TLS clients"): the socket goes as a descriptor, and this says what the old
/// process held of it in user space. The kernel's buffers go with the socket: bytes the client
/// sent that nobody read yet are read by the heir, bytes written are sent by the kernel as before.
struct HandoverStream: Sendable, Equatable {
    /// Matches the `session` of the connection's `tcpClient` socket.
    var id: UInt64
    /// The loop that served it: the heir serves it on the same one.
    var loop: UInt16
    /// Client address, server (listener) address; the transport is TCP.
    var client: TransportAddress
    var server: TransportAddress
    /// Its allocation's session id in the state snapshot; 0 without one.
    var session: UInt64
    /// The start of a frame (RFC 8489 §6.2.2, RFC 8656 §12.5) whose rest the client has not sent.
    var input: [UInt8]
    /// Answers and relayed packets queued for the client, not yet taken by the kernel (for TLS,
    /// sealed records).
    var output: [UInt8]
    /// A TLS client's session (handover protocol version 4); nil for TCP.
    var tls: HandoverTLSSession?

    /// The most bytes of `input`, `output` and a TLS session's records together: a connection
    /// holding more stays with the old process (it drains there), so one message carries one
    /// connection.
    static let maxBytes = 48 * 1024

    var fiveTuple: FiveTuple { FiveTuple(client: client, server: server, transport: tls == nil ? .tcp : .tls) }

    func encode(into out: inout HandoverOutput) {
        out.u64(id)
        out.u16(loop)
        out.address(client)
        out.address(server)
        out.u64(session)
        out.u32(UInt32(input.count))
        out.bytes += input
        out.u32(UInt32(output.count))
        out.bytes += output
        tls?.encode(into: &out)
    }

    init(
        id: UInt64, loop: UInt16, client: TransportAddress, server: TransportAddress, session: UInt64,
        input: [UInt8], output: [UInt8], tls: HandoverTLSSession? = nil
    ) {
        self.id = id
        self.loop = loop
        self.client = client
        self.server = server
        self.session = session
        self.input = input
        self.output = output
        self.tls = tls
    }

    /// Reads one; `tls` when the message's tag says a TLS session follows.
    init(decoding input: inout HandoverInput, tls: Bool) throws(HandoverMessage.DecodingError) {
        id = try input.u64()
        loop = try input.u16()
        client = try input.address()
        server = try input.address()
        session = try input.u64()
        self.input = try input.counted(max: Self.maxBytes)
        output = try input.counted(max: Self.maxBytes - self.input.count)
        self.tls =
            tls ? try HandoverTLSSession(decoding: &input, room: Self.maxBytes - self.input.count - output.count) : nil
    }
}
