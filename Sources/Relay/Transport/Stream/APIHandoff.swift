import Glibc
import RelayCore
import StunCodec

/// How the HTTP API reaches clients on a TURN port it shares (docs/tls.md, "The API on the same
/// port"). The API is libevent's evhttp on the main thread, and evhttp cannot adopt a connection
/// a loop already accepted and read from; so the loop that accepted it keeps it (and its TLS
/// session), and passes the plaintext both ways over a Unix stream socket to a listener of the
/// API's own, like an RFC 6062 pipe.
///
/// The listener has an abstract address (no file; gone with the process) drawn at random per
/// process. The loop's end of each connection binds an address of its own, chosen by the
/// kernel (autobind), which is registered here with the client's address before it connects:
/// the API looks the client up by its peer's address, for its logs and per-client rate limit.
/// A local process connecting by itself finds no entry and is served as "unknown", like any
/// client without an address.
final class APIHandoff: Sendable {
    /// The listener's address: the bytes after `sun_path`'s leading zero.
    let name: [UInt8]
    private let clients = Locked<[[UInt8]: TransportAddress]>([:])
    /// The listening socket, made before the loops run (so their first API connections wait in
    /// its backlog for the API), until the API's evhttp takes it (`takeListener`); -1 when it
    /// could not be made (`listenError` says why).
    private let listener = Locked<Int32>(-1)
    let listenError: Int32

    /// Connections waiting to be accepted by the API's listener at most.
    static let backlog: Int32 = 1024
    /// Clients registered at most (an API connection each); past it connections get no entry.
    static let clientLimit = 65536

    init() {
        var random = [UInt8](repeating: 0, count: 8)
        for i in random.indices { random[i] = UInt8.random(in: 0...255) }
        let hex = random.map { String($0, radix: 16) }.joined()
        name = Array("relayd-api-\(getpid())-\(hex)".utf8)
        let fd = Self.listen(name)
        listenError = fd < 0 ? errno : 0
        listener.withLock { $0 = fd }
    }

    deinit {
        let fd = listener.withLock { $0 }
        if fd >= 0 { close(fd) }
    }

    /// The listening socket, once, for the API's evhttp (which closes it); nil when it could
    /// not be made or was taken.
    func takeListener() -> Int32? {
        listener.withLock { fd in
            defer { fd = -1 }
            return fd >= 0 ? fd : nil
        }
    }

    /// A non-blocking listening socket on `name`; -1 (errno set) when it cannot be made.
    private static func listen(_ name: [UInt8]) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return -1 }
        guard Self.withAddress(name, { Glibc.bind(fd, $0, $1) }) == 0, Glibc.listen(fd, Self.backlog) == 0 else {
            let error = errno
            close(fd)
            errno = error
            return -1
        }
        return fd
    }

    /// A non-blocking connection to the API's listener for `client`, registered under the
    /// address the kernel gave this end, and that address; nil (errno set) when none can be made.
    func connect(for client: TransportAddress) -> (fd: Int32, name: [UInt8])? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var family = sockaddr_un()
        family.sun_family = sa_family_t(AF_UNIX)
        // Binding only the family asks the kernel for a unique abstract address (unix(7), autobind).
        let bound = withUnsafePointer(to: &family) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sa_family_t>.size)) }
        }
        guard bound == 0, let own = Self.abstractName(of: fd, peer: false) else {
            close(fd)
            return nil
        }
        let registered = clients.withLock { table -> Bool in
            guard table.count < Self.clientLimit else { return false }
            table[own] = client
            return true
        }
        // A Unix stream connect completes at once, or fails: EAGAIN is a full backlog.
        let connected = Self.withAddress(name) { Glibc.connect(fd, $0, $1) }
        guard connected == 0 else {
            let error = errno
            if registered { forget(own) }
            close(fd)
            errno = error
            return nil
        }
        return (fd, own)
    }

    /// The connection whose loop end had `name` closed.
    func forget(_ name: [UInt8]) {
        _ = clients.withLock { $0.removeValue(forKey: name) }
    }

    /// The client behind the API's accepted connection `fd`, if a loop registered one.
    func client(ofAccepted fd: Int32) -> TransportAddress? {
        guard let peer = Self.abstractName(of: fd, peer: true) else { return nil }
        return clients.withLock { $0[peer] }
    }

    /// Calls `body` with the `sockaddr_un` of abstract address `name` and its length.
    private static func withAddress(_ name: [UInt8], _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let length = withUnsafeMutableBytes(of: &address.sun_path) { path -> Int in
            path[0] = 0
            let count = min(name.count, path.count - 1)
            for i in 0..<count { path[1 + i] = name[i] }
            return 1 + count
        }
        let total = socklen_t(MemoryLayout<sa_family_t>.size + length)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, total) }
        }
    }

    /// The abstract address of `fd`'s own end, or of its peer's: the bytes after the leading zero.
    private static func abstractName(of fd: Int32, peer: Bool) -> [UInt8]? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let status = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                peer ? getpeername(fd, $0, &length) : getsockname(fd, $0, &length)
            }
        }
        let offset = MemoryLayout<sa_family_t>.size
        guard status == 0, Int(length) > offset + 1 else { return nil }
        return withUnsafeBytes(of: &address.sun_path) { path -> [UInt8]? in
            guard path[0] == 0 else { return nil }
            return Array(path[1..<(Int(length) - offset)])
        }
    }
}
