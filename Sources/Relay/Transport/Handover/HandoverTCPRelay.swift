import RelayCore
import StunCodec

// A TCP allocation's RFC 6062 state in a live upgrade (docs/live-upgrade.md, "RFC 6062
// connections"): the `tcpRelay` message's body. Its peer connections' sockets go in `sockets`
// as kind `peerConnection` (connecting or ready ones) or with their pipes (`HandoverPipe`).
extension TCPRelaySnapshot {
    func encode(into out: inout HandoverOutput) {
        out.u64(session)
        out.u64(bytesToPeer)
        out.u64(bytesToClient)
        out.u16(UInt16(connections.count))
        for connection in connections {
            out.u32(connection.id.value)
            out.address(connection.peer)
            out.u64(UInt64(bitPattern: connection.deadline))
            switch connection.state {
            case .connecting(nil):
                out.u8(1)
            case .connecting(let connect?):
                out.u8(2)
                out.u16(connect.method)
                out.u32(connect.transactionID.high)
                out.u64(connect.transactionID.low)
                out.u8(connect.fingerprinted ? 1 : 0)
                out.u8(connect.key.sha256 ? 1 : 0)
                out.u8(UInt8(connect.key.bytes.count))
                out.bytes += connect.key.bytes
            case .ready:
                out.u8(3)
            case .piped(let loop):
                out.u8(4)
                out.u16(loop)
            }
        }
    }

    init(decoding input: inout HandoverInput) throws(HandoverMessage.DecodingError) {
        let session = try input.u64()
        let toPeer = try input.u64()
        let toClient = try input.u64()
        let count = Int(try input.u16())
        guard count <= Self.maxConnections else { throw .init(description: "too many peer connections") }
        var connections: [Connection] = []
        connections.reserveCapacity(count)
        for _ in 0..<count {
            let id = PeerConnectionID(try input.u32())
            let peer = try input.address()
            let deadline = Int64(bitPattern: try input.u64())
            // Monotonic seconds since boot: anything outside 0..<2^40 is damage (and would
            // overflow the arithmetic on it).
            guard (0..<(1 << 40)).contains(deadline) else { throw .init(description: "bad deadline") }
            let state: State
            switch try input.u8() {
            case 1:
                state = .connecting(nil)
            case 2:
                let method = try input.u16()
                let transactionID = TransactionID(high: try input.u32(), low: try input.u64())
                let fingerprinted = try input.u8() != 0
                let sha256 = try input.u8() != 0
                let length = Int(try input.u8())
                // An MD5 key is 16 bytes, a SHA-256 one 32 (RFC 8489 §9.2.2).
                guard length == (sha256 ? 32 : 16) else { throw .init(description: "bad Connect key") }
                let key = IntegrityKey(bytes: try input.bytes(length), sha256: sha256)
                state = .connecting(
                    Connect(method: method, transactionID: transactionID, fingerprinted: fingerprinted, key: key))
            case 3:
                state = .ready
            case 4:
                state = .piped(loop: try input.u16())
            default:
                throw .init(description: "unknown peer connection state")
            }
            connections.append(Connection(id: id, peer: peer, deadline: deadline, state: state))
        }
        self.init(session: session, bytesToPeer: toPeer, bytesToClient: toClient, connections: connections)
    }
}
