import CLibevent
import Glibc
import StunCodec

/// Small IPv4 UDP socket helpers (the bench only talks to loopback servers).
enum UDPEndpoint {
    /// A non-blocking UDP socket bound to `ip` on an ephemeral port, with `bufferBytes` of
    /// kernel buffer each way; nil when the system refuses (e.g. out of descriptors).
    static func open(ip: IPAddress, bufferBytes: Int32) -> Int32? {
        let fd = socket(
            AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var size = bufferBytes
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, 4)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, 4)
        var sa = sockaddrIn(TransportAddress(ip: ip, port: 0))
        let ok = withUnsafePointer(to: &sa) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard ok else {
            close(fd)
            return nil
        }
        return fd
    }

    /// The address a socket is bound to.
    static func localAddress(_ fd: Int32) -> TransportAddress? {
        var sa = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &sa) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        return ok ? address(sa) : nil
    }

    /// `address` as a sockaddr_in (IPv4 only).
    static func sockaddrIn(_ address: TransportAddress) -> sockaddr_in {
        var sa = sockaddr_in()
        sa.sin_family = sa_family_t(AF_INET)
        sa.sin_port = address.port.bigEndian
        sa.sin_addr.s_addr = (address.ip.ipv4Value ?? 0).bigEndian
        return sa
    }

    /// A sockaddr_in as a transport address.
    static func address(_ sa: sockaddr_in) -> TransportAddress {
        TransportAddress(
            ip: IPAddress(ipv4: UInt32(bigEndian: sa.sin_addr.s_addr)), port: UInt16(bigEndian: sa.sin_port))
    }

    /// Connects a UDP socket to `address`, so plain send/recv work and strays are filtered.
    static func connect(_ fd: Int32, to address: TransportAddress) -> Bool {
        var sa = sockaddrIn(address)
        return withUnsafePointer(to: &sa) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// Sends one datagram on a connected socket; false when the kernel refused it.
    @discardableResult
    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        Glibc.send(fd, bytes.baseAddress, bytes.count, 0) == bytes.count
    }

    /// Raises the soft descriptor limit to the hard limit (10,000 allocations need 10,000 sockets).
    static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        getrlimit(RLIMIT_NOFILE_VALUE, &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(RLIMIT_NOFILE_VALUE, &limit)
        getrlimit(RLIMIT_NOFILE_VALUE, &limit)
        return Int(limit.rlim_cur)
    }

    #if os(Linux)
        static let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #endif
}
