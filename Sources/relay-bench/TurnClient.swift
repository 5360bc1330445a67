import Glibc
import StunCodec

/// One benchmark client: its own UDP socket (or TLS connection) towards the server, its REST
/// credentials, what the 401 taught it (REALM, NONCE, key), and its allocation.
final class TurnClient {
    let index: Int
    /// The socket, connected to the server (replaced by `reopen`).
    private(set) var fd: Int32
    let credentials: ClientCredentials
    /// With `--transport tls`: the TLS connection on `fd`.
    var stream: ClientStream?
    var realm: String?
    var nonce: String?
    var key: [UInt8] = []
    /// XOR-RELAYED-ADDRESS of the allocation, once allocated.
    var relayed: TransportAddress?
    /// Where this client's data goes: the partner's relayed address or the echo peer.
    var peer: TransportAddress?
    /// The channel bound to `peer` (0x4000 + the client's index, within RFC 8656's range).
    var channel: UInt16

    init(index: Int, fd: Int32, credentials: ClientCredentials) {
        self.index = index
        self.fd = fd
        self.credentials = credentials
        channel = 0x4000 + UInt16(index % 0x1000)
    }

    /// Takes REALM and NONCE from a 401 or 438 (RFC 8489 §9.2.4) and derives the key.
    func learn(realm newRealm: String?, nonce newNonce: String?) {
        if let newRealm, newRealm != realm {
            realm = newRealm
            key = credentials.key(realm: newRealm)
        }
        if let newNonce { nonce = newNonce }
    }

    /// Replaces the socket with a new one on another local port (RFC 8656 §7.4: after a 437 the
    /// client retries from a different transport address); false if none could be opened.
    func reopen(server: TransportAddress, bufferBytes: Int32) -> Bool {
        guard stream == nil else { return false }
        let local = UDPEndpoint.localAddress(fd)?.ip ?? server.ip
        guard let fresh = UDPEndpoint.open(ip: local, bufferBytes: bufferBytes) else { return false }
        guard UDPEndpoint.connect(fresh, to: server) else {
            close(fresh)
            return false
        }
        close(fd)
        fd = fresh
        nonce = nil
        return true
    }

    /// Calls `body` with every message waiting: each datagram (UDP, read into `buffer`; at most
    /// `datagrams` of them, the rest stay for the next readiness) or each whole frame of the TLS
    /// stream.
    func receive(
        into buffer: UnsafeMutableRawBufferPointer, datagrams: Int = .max, _ body: (UnsafeRawBufferPointer) -> Void
    ) {
        if let stream {
            stream.readFrames(body)
            return
        }
        var left = datagrams
        while left > 0 {
            let n = recv(fd, buffer.baseAddress, buffer.count, 0)
            if n <= 0 { return }
            body(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            left -= 1
        }
    }

    /// Sends one message (a request or data) to the server; false when the kernel refused it.
    @discardableResult
    func send(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if let stream { return stream.write(bytes) }
        return UDPEndpoint.send(fd, bytes)
    }
}
