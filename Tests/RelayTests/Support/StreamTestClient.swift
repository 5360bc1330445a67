import Glibc
import StunCodec
import Synchronization

@testable import CoreTestSupport

/// A blocking TCP client of a loop's TURN-over-TCP listener on 127.0.0.1, for tests that drive
/// real loops on real threads: STUN requests and ChannelData out, frames in (RFC 8656 §12.5
/// framing: ChannelData padded to 4 bytes). Reads time out after `timeoutSeconds`.
final class StreamTestClient: @unchecked Sendable {
    let descriptor: Int32
    private var buffer: [UInt8] = []

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    init(port: UInt16, timeoutSeconds: Int = 5) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
        var address = UDPTestSocket.socketAddress(TransportAddress(ip: .ipv4Loopback, port: port))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "connect 127.0.0.1:\(port): \(message)")
        }
        descriptor = fd
    }

    deinit { close(descriptor) }

    /// A free TCP port on 127.0.0.1 right now.
    static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = UDPTestSocket.socketAddress(TransportAddress(ip: .ipv4Loopback, port: 0))
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok else { throw Failure(description: "no free TCP port") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Writes all of `bytes`; false when the connection is gone.
    @discardableResult
    func write(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    /// ChannelData on `channel`, padded to a multiple of 4 for the stream.
    func sendChannelData(_ channel: UInt16, _ payload: [UInt8]) -> Bool {
        var frame: [UInt8] = [UInt8(channel >> 8), UInt8(channel & 0xFF), UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        frame += payload
        while frame.count % 4 != 0 { frame.append(0) }
        return write(frame)
    }

    /// The next whole frame (STUN message or padded ChannelData); nil on timeout, close or a bad frame.
    func readFrame() -> [UInt8]? {
        while true {
            if let frame = takeFrame() { return frame }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress!, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            buffer += chunk[0..<n]
        }
    }

    private func takeFrame() -> [UInt8]? {
        guard !buffer.isEmpty else { return nil }
        let found = buffer.withUnsafeBytes { raw -> Int? in
            guard let frame = try? StreamFramer.nextFrame(in: raw) else { return nil }
            return frame.length
        }
        guard let length = found, length <= buffer.count else { return nil }
        let frame = Array(buffer[0..<length])
        buffer.removeFirst(length)
        return frame
    }

    /// `TurnTestClient`'s transport: sends a request and returns the next STUN message that is
    /// not an indication, skipping ChannelData and Data indications that arrive first.
    func exchange(_ request: [UInt8]) throws -> ReceivedStun? {
        guard write(request) else { return nil }
        while let frame = readFrame() {
            // ChannelData and indications (Data indications, with DATA or ICMP) are not the answer.
            guard let first = frame.first, first < 0x40 else { continue }
            let message = try ReceivedStun(frame)
            if message.type.messageClass != .indication { return message }
        }
        return nil
    }

    /// Resets the connection (SO_LINGER 0): the server sees an error, not an orderly close.
    func reset() {
        var abort = linger(l_onoff: 1, l_linger: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
        shutdown(descriptor, Int32(SHUT_RDWR))
    }
}
