import COpenSSL
import Glibc
import StunCodec

/// One client's TURN-over-TCP or TURN-over-TLS connection (RFC 8656 §3.1): STUN messages and
/// ChannelData (padded to 4 bytes, RFC 8656 §12.5) back to back in the byte stream. Over TLS the
/// server's certificate is not verified (loopback benchmark with a throwaway self-signed
/// certificate).
///
/// An SSL object must not be used from two threads at once, so streams run send and receive on
/// one thread (see `DataPhase`).
final class ClientStream {
    /// Nil for plain TCP.
    let ssl: OpaquePointer?
    let fd: Int32
    private let buffer: UnsafeMutableRawBufferPointer
    private var filled = 0

    /// A client context shared by all connections (no verification, TLS 1.2+).
    static func makeContext() -> OpaquePointer? {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { return nil }
        SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
        return ctx
    }

    /// Drops the creator's reference to a context from `makeContext` (connections keep their own).
    static func releaseContext(_ context: OpaquePointer) { SSL_CTX_free(context) }

    /// `bind` or `connect` of `fd` to an IPv4 `address`: whether it succeeded.
    private static func call(
        _ operation: (Int32, UnsafePointer<sockaddr>?, socklen_t) -> Int32, _ fd: Int32, _ address: TransportAddress
    ) -> Bool {
        var sa = UDPEndpoint.sockaddrIn(address)
        return withUnsafePointer(to: &sa) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                operation(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// Connects (TCP, then with a `context` the TLS handshake, both blocking) and leaves the
    /// socket non-blocking.
    /// `source`: the local address to connect from; the kernel's choice when nil.
    init?(context: OpaquePointer?, server: TransportAddress, source: IPAddress? = nil) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
        let bound = source.map { Self.call(Glibc.bind, fd, TransportAddress(ip: $0, port: 0)) } ?? true
        guard bound, Self.call(Glibc.connect, fd, server) else {
            close(fd)
            return nil
        }
        guard let context else {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            ssl = nil
            self.fd = fd
            buffer = .allocate(byteCount: 1 << 17, alignment: 16)
            return
        }
        guard let ssl = SSL_new(context) else {
            close(fd)
            return nil
        }
        SSL_set_fd(ssl, fd)
        guard SSL_connect(ssl) == 1 else {
            SSL_free(ssl)
            close(fd)
            return nil
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        self.ssl = ssl
        self.fd = fd
        buffer = .allocate(byteCount: 1 << 17, alignment: 16)
    }

    deinit {
        if let ssl { SSL_free(ssl) }
        close(fd)
        buffer.deallocate()
    }

    /// Writes all of `bytes` (over TLS as one record), waiting (up to 1 s) while the socket is
    /// full; false on error or timeout.
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let ssl else { return writePlain(bytes) }
        for _ in 0..<100 {
            let n = SSL_write(ssl, bytes.baseAddress, Int32(bytes.count))
            if n == bytes.count { return true }
            let error = SSL_get_error(ssl, n)
            guard error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_WANT_READ else { return false }
            var pfd = pollfd(fd: fd, events: Int16(error == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN), revents: 0)
            _ = poll(&pfd, 1, 10)
        }
        return false
    }

    private func writePlain(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var sent = 0
        for _ in 0..<100 {
            let n = send(fd, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            if n > 0 {
                sent += n
                if sent == bytes.count { return true }
                continue
            }
            guard n < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else { return false }
            var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            _ = poll(&pfd, 1, 10)
        }
        return false
    }

    /// Reads whatever has arrived and calls `body` with each whole frame (a STUN message or a
    /// padded ChannelData message). Returns false when the connection is closed or broken.
    @discardableResult
    func readFrames(_ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        while true {
            if filled == buffer.count { return false }  // a frame larger than the buffer: broken
            let capacity = buffer.count - filled
            let n: Int
            if let ssl {
                let got = SSL_read(ssl, buffer.baseAddress! + filled, Int32(capacity))
                if got <= 0 {
                    let error = SSL_get_error(ssl, got)
                    return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE
                }
                n = Int(got)
            } else {
                n = recv(fd, buffer.baseAddress! + filled, capacity, 0)
                if n == 0 { return false }
                if n < 0 { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR }
            }
            filled += Int(n)
            var start = 0
            while filled - start >= 4 {
                let base = buffer.baseAddress! + start
                let length = Int(UInt16(bigEndian: base.loadUnaligned(fromByteOffset: 2, as: UInt16.self)))
                let first = base.load(as: UInt8.self)
                let size = first & 0xC0 == 0 ? 20 + length : 4 + ((length + 3) & ~3)
                guard filled - start >= size else { break }
                body(UnsafeRawBufferPointer(start: base, count: size))
                start += size
            }
            if start > 0 {
                if start < filled { memmove(buffer.baseAddress!, buffer.baseAddress! + start, filled - start) }
                filled -= start
            }
        }
    }
}
