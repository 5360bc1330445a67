import RelayCore
import StunCodec

/// An RFC 6062 data connection and its peer connection in a live upgrade (docs/live-upgrade.md,
/// "RFC 6062 connections"): both sockets go as descriptors (kinds `pipeClient` and `pipePeer`,
/// named by the connection id), and this says what the old process held of the pipe in user
/// space. A pipe may hold more than one message carries: it then goes in pieces, each with the
/// same header and the next bytes (`pieces`, `append`).
struct HandoverPipe: Sendable, Equatable {
    /// The CONNECTION-ID (RFC 6062 §6.2.1).
    var id: PeerConnectionID
    /// The loop that served the data connection: the heir serves it on the same one.
    var loop: UInt16
    /// The data connection's client and server (listener) addresses; its transport is TCP.
    var client: TransportAddress
    var server: TransportAddress
    /// Its allocation's session id in the state snapshot.
    var session: UInt64
    var peer: TransportAddress
    /// The client's bytes not yet written to the peer, the last `unpaid` of them not yet
    /// granted by the allocation's `max-bps` budget.
    var toPeer: [UInt8]
    var unpaid: UInt32
    /// The peer's bytes queued for the client, not yet taken by the kernel.
    var toClient: [UInt8]

    /// The most bytes a pipe holds each way (`TCPPipe.pauseBytes` plus a read, with room):
    /// larger counts are refused as damage.
    static let maxHeldBytes = 1 << 20
    /// The bytes one piece carries, both ways together.
    static let bytesPerPiece = 56 * 1024

    var fiveTuple: FiveTuple { FiveTuple(client: client, server: server, transport: .tcp) }

    /// The pipe cut into messages of at most `bytesPerPiece` bytes; the first is whole but for
    /// its bytes, each later one adds to them.
    func pieces() -> [HandoverPipe] {
        var pieces: [HandoverPipe] = []
        var peerStart = 0
        var clientStart = 0
        repeat {
            var piece = self
            let peerCount = min(toPeer.count - peerStart, Self.bytesPerPiece)
            let clientCount = min(toClient.count - clientStart, Self.bytesPerPiece - peerCount)
            piece.toPeer = Array(toPeer[peerStart..<peerStart + peerCount])
            piece.toClient = Array(toClient[clientStart..<clientStart + clientCount])
            peerStart += peerCount
            clientStart += clientCount
            pieces.append(piece)
        } while peerStart < toPeer.count || clientStart < toClient.count
        return pieces
    }

    /// Adds a later piece's bytes; false when it is not a piece of this pipe or the bytes grow
    /// past `maxHeldBytes`.
    mutating func append(_ piece: HandoverPipe) -> Bool {
        var header = piece
        header.toPeer = toPeer
        header.toClient = toClient
        guard header == self, toPeer.count + piece.toPeer.count <= Self.maxHeldBytes,
            toClient.count + piece.toClient.count <= Self.maxHeldBytes
        else { return false }
        toPeer += piece.toPeer
        toClient += piece.toClient
        return true
    }

    func encode(into out: inout HandoverOutput) {
        out.u32(id.value)
        out.u16(loop)
        out.address(client)
        out.address(server)
        out.u64(session)
        out.address(peer)
        out.u32(unpaid)
        out.u32(UInt32(toPeer.count))
        out.bytes += toPeer
        out.u32(UInt32(toClient.count))
        out.bytes += toClient
    }

    init(
        id: PeerConnectionID, loop: UInt16, client: TransportAddress, server: TransportAddress, session: UInt64,
        peer: TransportAddress, toPeer: [UInt8], unpaid: UInt32, toClient: [UInt8]
    ) {
        self.id = id
        self.loop = loop
        self.client = client
        self.server = server
        self.session = session
        self.peer = peer
        self.toPeer = toPeer
        self.unpaid = unpaid
        self.toClient = toClient
    }

    init(decoding input: inout HandoverInput) throws(HandoverMessage.DecodingError) {
        id = PeerConnectionID(try input.u32())
        loop = try input.u16()
        client = try input.address()
        server = try input.address()
        session = try input.u64()
        peer = try input.address()
        unpaid = try input.u32()
        toPeer = try input.counted(max: Self.bytesPerPiece)
        toClient = try input.counted(max: Self.bytesPerPiece - toPeer.count)
    }
}
