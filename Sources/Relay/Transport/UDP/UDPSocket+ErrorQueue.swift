import CLibevent
import Glibc
import StunCodec

/// ICMP errors for what a relay socket sent (RFC 8656 §11.5), read from the socket's error queue.
///
/// With `IP_RECVERR` / `IPV6_RECVERR` on, the kernel queues each ICMP error that quotes one of
/// the socket's datagrams, naming the datagram's destination (address and port) and the ICMP type,
/// code and, for "too big", the next-hop MTU; a datagram this host refused to send because it
/// exceeds the known path MTU (DONT-FRAGMENT, RFC 8656 §7.2) is queued the same way as a local
/// EMSGSIZE. A non-empty queue makes the socket readable (EPOLLERR). docs/icmp.md.
extension UDPSocket {
    /// Turns the error queue on for a relay socket of `family`. False when the kernel refused.
    @discardableResult
    static func enableErrorQueue(_ fd: Int32, family: IPAddress.Family) -> Bool {
        var one: Int32 = 1
        if family == .ipv6 { return setsockopt(fd, ipv6OptionLevel, IPV6_RECVERR, &one, 4) == 0 }
        return setsockopt(fd, Int32(IPPROTO_IP), IP_RECVERR, &one, 4) == 0
    }

    /// Clears the socket's pending asynchronous error (`SO_ERROR`). The kernel sets it with each
    /// queued ICMP error, and it would otherwise fail the socket's next send without sending.
    static func clearPendingError(_ fd: Int32) {
        var error: Int32 = 0
        var length = socklen_t(4)
        _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
    }

    /// One entry read off the error queue.
    enum QueuedError {
        /// An error for a datagram sent to `destination`; `icmp` is what RFC 8656 §11.5 passes to
        /// the client, nil for an error it does not. `local`: this host refused the datagram (the
        /// kernel then names the destination's port as 0: the socket is not connected).
        case datagram(destination: TransportAddress, icmp: ICMP?, local: Bool)
        /// An entry relayd cannot use (no extended error, or no destination).
        case unusable
    }

    /// Takes one entry off `fd`'s error queue; nil when the queue is empty.
    static func readQueuedError(_ fd: Int32) -> QueuedError? {
        var entry = relayd_socket_error()
        switch relayd_read_socket_error(fd, &entry) {
        case ..<0: return nil
        case 0: return .unusable
        default: break
        }
        let destination = withUnsafeBytes(of: &entry.destination) { SocketAddress.read($0.baseAddress!) }
        guard let destination else { return .unusable }
        let icmp = icmpAttribute(
            origin: entry.origin, type: entry.type, code: entry.code, info: entry.info, error: Int32(entry.error),
            family: destination.ip.family)
        return .datagram(destination: destination, icmp: icmp, local: Int32(entry.origin) == SO_EE_ORIGIN_LOCAL)
    }

    /// The ICMP attribute (RFC 8656 §18.13) for one error-queue entry, or nil when RFC 8656 §11.5
    /// does not relay it.
    ///
    /// - ICMPv4 from the network: types 3 (destination unreachable) and 11 (time exceeded).
    /// - ICMPv6 from the network: types 1 (destination unreachable), 2 (packet too big) and 3
    ///   (time exceeded).
    /// - A local EMSGSIZE (this host knows the path MTU is smaller than the datagram, and the
    ///   allocation asked for DONT-FRAGMENT): reported as the ICMP the first router would have
    ///   sent, "fragmentation needed" (3, 4) or "packet too big" (2, 0), with the MTU.
    ///
    /// Error Data carries the MTU for "fragmentation needed" and "packet too big", else zero.
    static func icmpAttribute(
        origin: UInt8, type: UInt8, code: UInt8, info: UInt32, error: Int32, family: IPAddress.Family
    ) -> ICMP? {
        switch Int32(origin) {
        case SO_EE_ORIGIN_ICMP:
            guard type == 3 || type == 11 else { return nil }
            return ICMP(type: type, code: code, errorData: type == 3 && code == 4 ? info : 0)
        case SO_EE_ORIGIN_ICMP6:
            guard (1...3).contains(type) else { return nil }
            return ICMP(type: type, code: code, errorData: type == 2 ? info : 0)
        case SO_EE_ORIGIN_LOCAL:
            guard error == EMSGSIZE, info > 0 else { return nil }
            return family == .ipv4 ? ICMP(type: 3, code: 4, errorData: info) : ICMP(type: 2, code: 0, errorData: info)
        default:
            return nil
        }
    }
}
