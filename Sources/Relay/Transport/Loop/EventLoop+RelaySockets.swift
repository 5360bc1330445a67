import CLibevent
import Glibc
import RelayCore
import StunCodec

/// A loop's relay sockets: opened for the core's Allocates, watched from an allocation's first
/// permission, closed with it (docs/architecture.md, "Relay sockets").
extension EventLoop {
    /// Executes an `openRelaySocket` command; the outcome goes back to the core after the flush.
    func open(_ request: RelaySocketOpen) {
        let opening = request.tcp ? openTCPRelaySocket(bound: request.address) : openRelaySocket(bound: request.address)
        relayOpens.append((request, opening))
    }

    /// Opens a UDP relay socket, not yet read: the core watches it at its allocation's first
    /// permission (`CoreCommand.watchRelaySocket`). Until then it may queue only the kernel's
    /// minimum, so peers cannot park memory in idle allocations' sockets, and nothing of its
    /// sending side is set up: nothing is sent through it before a permission.
    func openRelaySocket(bound address: TransportAddress) -> RelaySocketOpening {
        guard let fd = UDPSocket.open(bound: address, reusePort: false, bufferBytes: nil) else {
            return RelaySocketOpening(failure: errno)
        }
        var size = Self.unwatchedReceiveBytes
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, 4)
        return .opened(RelaySocket(descriptor: fd))
    }

    /// Takes relay socket `fd`, which a live upgrade handed over (docs/live-upgrade.md), as one
    /// this loop opened: not read until the core watches it. Its buffers stay as the process
    /// before set them (the socket is still that process's too until the upgrade commits).
    func adoptRelaySocket(_ fd: Int32) -> RelaySocketOpening {
        .opened(RelaySocket(descriptor: fd))
    }

    /// Reads relay socket `socket` on this loop from now on (`CoreCommand.watchRelaySocket`),
    /// with its full buffers and its error queue; `drain`: first drops what it queued, counted
    /// as packets without a permission (RFC 8656 §9), which they were when they came. `retry`:
    /// a second try (`retryRelayWatches`), which logs no failure again.
    func watchRelaySocket(_ socket: RelaySocket, drain: Bool, retry: Bool = false) {
        let fd = socket.descriptor
        guard relayEvents[fd] == nil else { return }
        // What came before the permission goes even when the event cannot be made: a retry
        // reads what comes after it.
        if drain {
            var dropped = 0
            while dropped < Self.drainLimit && recv(fd, nil, 0, Int32(MSG_DONTWAIT | MSG_TRUNC)) >= 0 { dropped += 1 }
            for _ in 0..<dropped { core.counters.drop(.noPermission) }
        }
        guard let event = makeRelayEvent(fd) else {
            // Before the buffers grow: a socket that cannot be watched keeps its smallest one.
            // Not left unread for good: the allocation's peers would never reach its client.
            relayWatchRetries.insert(fd)
            guard !retry else { return }
            return logger.error(
                "cannot watch a relay socket: out of memory; trying again every second",
                metadata: ["event": "relay_watch_failed", "fd": "\(fd)"])
        }
        var size = Self.relayBufferBytes
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, 4)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, 4)
        // ICMP errors for what it sends (RFC 8656 §11.5), from now on.
        var domain: Int32 = 0
        var length = socklen_t(4)
        if getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) == 0 {
            UDPSocket.enableErrorQueue(fd, family: domain == AF_INET6 ? .ipv6 : .ipv4)
        }
        // Added even while a live upgrade pauses the loop: only an allocation that stays here
        // (a TCP or TLS client's) can get its first permission then.
        event_add(event, nil)
        relayEvents[fd] = event
    }

    /// The relay socket's read event, nil when libevent cannot make it (or a test's
    /// `relayWatchFault` says so).
    private func makeRelayEvent(_ fd: Int32) -> OpaquePointer? {
        if let fault = relayWatchFault, fault() { return nil }
        return event_new(base, fd, Int16(EV_READ | EV_PERSIST), { fd, _, arg in
            Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().relayReadable(fd)
        }, opaqueSelf)
    }

    /// A watched relay socket's receive and send buffers (SO_RCVBUF, SO_SNDBUF).
    static let relayBufferBytes: Int32 = 256 * 1024
    /// An unwatched one's receive buffer: 0 asks for the kernel's minimum (a few datagrams).
    static let unwatchedReceiveBytes: Int32 = 0
    /// At most this many queued datagrams are dropped when a socket is watched; any later ones
    /// are read and judged against the permissions as usual.
    static let drainLimit = 64

    func openTCPRelaySocket(bound address: TransportAddress) -> RelaySocketOpening {
        tcpRelay.openListener(bound: address)
    }

    /// Unregisters at once; the descriptor closes at the end of this flush, so packets already
    /// queued for it never go out on a reused descriptor. A TCP allocation's listener takes its
    /// peer connections with it.
    func closeRelaySocket(_ socket: RelaySocket) {
        relayWatchRetries.remove(socket.descriptor)
        if tcpRelay.endRelay(socket) { return pendingClose.append(socket.descriptor) }
        if let event = relayEvents.removeValue(forKey: socket.descriptor) { event_free(event) }
        pendingClose.append(socket.descriptor)
    }

    /// Tries again to watch the relay sockets whose event could not be made; their queued
    /// datagrams are read then, judged against the permissions as usual.
    func retryRelayWatches() {
        let retries = relayWatchRetries
        relayWatchRetries.removeAll()
        for fd in retries { watchRelaySocket(RelaySocket(descriptor: fd), drain: false, retry: true) }
    }

    func closePending() {
        for fd in pendingClose { close(fd) }
        pendingClose.removeAll(keepingCapacity: true)
    }
}
