import RelayCore
import Glibc
import StunCodec

/// A blocking IPv4 UDP socket on 127.0.0.1 with a receive timeout, for talking to a real relayd.
final class UDPTestSocket {
    let descriptor: Int32
    /// The local address the socket is bound to.
    let address: TransportAddress

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Binds 127.0.0.1:`port` (0: any free port) with SO_RCVTIMEO of `timeoutMilliseconds`.
    init(port: UInt16 = 0, timeoutMilliseconds: Int = 2000) throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: timeoutMilliseconds / 1000, tv_usec: (timeoutMilliseconds % 1000) * 1000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var local = UDPTestSocket.socketAddress(TransportAddress(ip: .ipv4Loopback, port: port))
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "bind 127.0.0.1:\(port): \(message)")
        }
        var name = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &name) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        descriptor = fd
        address = TransportAddress(ip: .ipv4Loopback, port: UInt16(bigEndian: name.sin_port))
    }

    deinit { close(descriptor) }

    func send(_ bytes: [UInt8], to destination: TransportAddress) throws {
        var target = UDPTestSocket.socketAddress(destination)
        let sent = bytes.withUnsafeBytes { raw in
            withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, raw.baseAddress, raw.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard sent == bytes.count else {
            throw Failure(description: "sendto \(destination): \(String(cString: strerror(errno)))")
        }
    }

    /// The next datagram and its source, or nil when the receive timeout passes first.
    func receive() throws -> (bytes: [UInt8], from: TransportAddress)? {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var source = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let count = buffer.withUnsafeMutableBytes { raw in
            withUnsafeMutablePointer(to: &source) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(descriptor, raw.baseAddress, raw.count, 0, $0, &length)
                }
            }
        }
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return nil }
            throw Failure(description: "recvfrom: \(String(cString: strerror(errno)))")
        }
        let from = TransportAddress(
            ip: IPAddress(ipv4: UInt32(bigEndian: source.sin_addr.s_addr)), port: UInt16(bigEndian: source.sin_port))
        return (Array(buffer[0..<count]), from)
    }

    /// Sends `bytes` and returns the first answer from `destination` that `accept` takes, or nil on timeout.
    func exchange(
        _ bytes: [UInt8], with destination: TransportAddress, accept: ([UInt8]) -> Bool = { _ in true }
    ) throws -> [UInt8]? {
        try send(bytes, to: destination)
        for _ in 0..<8 {
            guard let (answer, from) = try receive() else { return nil }
            if from == destination && accept(answer) { return answer }
        }
        return nil
    }

    /// A free UDP port on 127.0.0.1 at the moment of asking.
    static func freePort() throws -> UInt16 {
        try UDPTestSocket(port: 0).address.port
    }

    static func socketAddress(_ address: TransportAddress) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = address.port.bigEndian
        a.sin_addr.s_addr = UInt32(truncatingIfNeeded: address.ip.low).bigEndian
        return a
    }
}
