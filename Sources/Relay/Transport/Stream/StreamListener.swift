import RelayCore
import CLibevent
import Glibc
import StunCodec

/// One loop thread's TCP listening socket on one address (an `evconnlistener`). Every loop binds
/// its own with SO_REUSEPORT, as for UDP: the kernel spreads new connections over the loops and
/// each connection lives on the loop that accepted it, next to its allocation (other loops only
/// queue relay-to-relay packets on it, `StreamSink`).
final class StreamListener {
    let address: TransportAddress
    /// `.tcp` or `.tls`: what accepted connections speak.
    let transport: TransportProtocol
    /// A `.tcp` listener on a port TLS shares: each connection's first byte says which of the
    /// two it speaks (docs/tls.md, "One port for everything").
    let sharedWithTLS: Bool
    /// The HTTP API's own address, served by the loops (`StreamService.apiOnlyAddresses`).
    let apiOnly: Bool
    unowned let owner: StreamTransport
    private(set) var listener: OpaquePointer?
    /// Set while accepting is paused after running out of descriptors or memory.
    var pausedUntil: Int64?

    init(
        address: TransportAddress, transport: TransportProtocol, sharedWithTLS: Bool = false, apiOnly: Bool = false,
        owner: StreamTransport
    ) {
        self.address = address
        self.transport = transport
        self.sharedWithTLS = sharedWithTLS
        self.apiOnly = apiOnly
        self.owner = owner
    }

    deinit { close() }

    /// Binds and starts accepting, or accepts on `inherited`, a listening socket a live upgrade
    /// handed over (docs/live-upgrade.md); false (errno set) if the address cannot be bound.
    func open(base: OpaquePointer, inherited: Int32? = nil) -> Bool {
        var flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT
        if address.ip.family == .ipv6 { flags |= LEV_OPT_BIND_IPV6ONLY }
        var storage = sockaddr_storage()
        let created = withUnsafeMutableBytes(of: &storage) { raw -> OpaquePointer? in
            if let inherited {
                _ = fcntl(inherited, F_SETFL, fcntl(inherited, F_GETFL) | O_NONBLOCK)
                return evconnlistener_new(base, nil, nil, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 1024, inherited)
            }
            let length = SocketAddress.write(address, into: raw.baseAddress!)
            // No callback yet: the listener starts disabled until `evconnlistener_set_cb` below.
            return evconnlistener_new_bind(
                base, nil, nil, flags, 1024, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), Int32(length))
        }
        guard let created else { return false }
        listener = created
        let me = Unmanaged.passUnretained(self).toOpaque()
        evconnlistener_set_error_cb(created) { _, arg in
            Unmanaged<StreamListener>.fromOpaque(arg!).takeUnretainedValue().acceptFailed()
        }
        evconnlistener_set_cb(
            created,
            { _, fd, address, _, arg in
                let listener = Unmanaged<StreamListener>.fromOpaque(arg!).takeUnretainedValue()
                guard let address, let client = SocketAddress.read(UnsafeRawPointer(address)) else {
                    Glibc.close(fd)
                    return
                }
                listener.owner.accept(fd, from: client, on: listener)
            }, me)
        return true
    }

    /// accept() failed with something other than a retriable error: EMFILE, ENFILE, ENOBUFS or
    /// ENOMEM. The pending connection would wake the loop again at once, so accepting pauses for
    /// a second (the transport's sweep resumes it).
    private func acceptFailed() {
        let error = errno
        guard let listener else { return }
        evconnlistener_disable(listener)
        pausedUntil = EventLoop.now() + 1
        owner.acceptPaused(self, error: error)
    }

    /// Stops accepting while a live upgrade hands the socket over: connections wait in its
    /// backlog for whichever process accepts next (`resume` if that is this one).
    func pauseForHandover() {
        if let listener { evconnlistener_disable(listener) }
    }

    /// Accepts again after a pause.
    func resume() {
        pausedUntil = nil
        if let listener { evconnlistener_enable(listener) }
    }

    /// The listening socket, while open.
    var descriptor: Int32? { listener.map { evconnlistener_get_fd($0) } }

    func close() {
        if let listener { evconnlistener_free(listener) }
        listener = nil
    }
}
