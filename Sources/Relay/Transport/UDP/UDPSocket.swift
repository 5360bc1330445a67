import CLibevent
import Glibc
import StunCodec

/// Non-blocking UDP sockets for listeners and relay addresses.
enum UDPSocket {
    /// Opens a UDP socket bound to `address`. Listeners set SO_REUSEPORT so every loop thread has
    /// its own socket on the same port and the kernel spreads clients by their 4-tuple.
    /// `bufferBytes` sets SO_RCVBUF and SO_SNDBUF; nil leaves both to the caller.
    static func open(bound address: TransportAddress, reusePort: Bool, bufferBytes: Int32? = 1 << 20) -> Int32? {
        let domain = address.ip.family == .ipv4 ? AF_INET : AF_INET6
        let fd = socket(domain, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        if address.ip.family == .ipv6 { setsockopt(fd, ipv6OptionLevel, IPV6_V6ONLY, &one, 4) }
        if reusePort {
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, 4)
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, 4)
        }
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
        // After bind: a relay port another process holds then costs socket, bind and close only
        // (the port pool tries the next one; docs/benchmark.md, "Node capacity").
        if var size = bufferBytes {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, 4)
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, 4)
        }
        return fd
    }

    /// Opens the socket of a moved mobile client (docs/mobility.md): bound to `server` in the
    /// listeners' SO_REUSEPORT group (whose selector never picks it), connected to `client`, then
    /// taken out of SO_REUSEPORT. The kernel finds it for `client` by its exact 4-tuple either way;
    /// clearing the option keeps the next moved client's socket from joining it: on kernels that
    /// take a connected IPv4 socket out of its group (6.13 and later), a socket bound later would
    /// otherwise found a group of its own with it, without the selector, and take every client's
    /// datagrams until it is connected in turn. Returns nil (errno set) when a step fails.
    static func openSteered(bound server: TransportAddress, connectedTo client: TransportAddress) -> Int32? {
        guard let fd = open(bound: server, reusePort: true) else { return nil }
        var storage = sockaddr_storage()
        let connected = withUnsafeMutableBytes(of: &storage) { raw -> Bool in
            let length = SocketAddress.write(client, into: raw.baseAddress!)
            return connect(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length) == 0
        }
        var zero: Int32 = 0
        guard connected, setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &zero, 4) == 0 else {
            let failure = errno
            close(fd)
            errno = failure
            return nil
        }
        return fd
    }
}
