import CLibevent
import Glibc
import StunCodec

/// Non-blocking UDP sockets for listeners and relay addresses.
enum UDPSocket {
    /// Opens a UDP socket bound to `address`. Listeners set SO_REUSEPORT so every loop thread has
    /// its own socket on the same port and the kernel spreads clients by their 4-tuple.
    static func open(bound address: TransportAddress, reusePort: Bool, bufferBytes: Int32 = 1 << 20) -> Int32? {
        let domain = address.ip.family == .ipv4 ? AF_INET : AF_INET6
        let fd = socket(domain, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        var size = bufferBytes
        if address.ip.family == .ipv6 { setsockopt(fd, ipv6OptionLevel, IPV6_V6ONLY, &one, 4) }
        if reusePort {
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, 4)
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, 4)
        }
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, 4)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, 4)
        var storage = sockaddr_storage()
        let ok = withUnsafeMutableBytes(of: &storage) { raw -> Bool in
            let length = SocketAddress.write(address, into: raw.baseAddress!)
            return bind(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length) == 0
        }
        guard ok else {
            let failure = errno
            close(fd)
            errno = failure
            return nil
        }
        return fd
    }
}
