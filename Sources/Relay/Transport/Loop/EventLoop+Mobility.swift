import CLibevent
import Glibc
import RelayCore
import StunCodec

extension EventLoop {
    /// A mobile allocation of this loop moved from `from` to `to` (RFC 8016, docs/mobility.md).
    /// SO_REUSEPORT spreads clients over the loops by their 4-tuple, so the new 5-tuple's
    /// datagrams would land on any loop. A UDP socket bound to the server address in the
    /// listeners' SO_REUSEPORT group and connected to the client wins the kernel's lookup for
    /// exactly that client: its datagrams come here. The group's selector program
    /// (`relayd_attach_listener_selector`) never picks it for anyone else, connected or not yet,
    /// and keeps every other client on its loop. The socket for `from` stops being read at
    /// once and closes at the end of the flush: answers already queued on it still leave, and its
    /// descriptor cannot be reused by the new socket in between.
    func steer(from: FiveTuple, to: FiveTuple?) {
        if let fd = steered.removeValue(forKey: from) {
            steeredAnswer[fd] = nil
            if let index = listeners.firstIndex(where: { $0.fd == fd }) {
                event_free(listeners[index].event)
                listeners.remove(at: index)
            }
            pendingClose.append(fd)
        }
        guard let to, to.transport == .udp, steered[to] == nil,
            let answer = listeners.first(where: { $0.address == to.server && steeredAnswer[$0.fd] == nil })?.fd
        else { return }
        guard let fd = UDPSocket.open(bound: to.server, reusePort: true) else {
            return logger.warning(
                "cannot open a socket for a moved client", metadata: ["event": "steer_failed", "five_tuple": "\(to)"])
        }
        var storage = sockaddr_storage()
        let connected = withUnsafeMutableBytes(of: &storage) { raw -> Bool in
            let length = SocketAddress.write(to.client, into: raw.baseAddress!)
            return connect(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length) == 0
        }
        guard connected, let event = event_new(base, fd, Int16(EV_READ | EV_PERSIST), { fd, _, arg in
            Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().listenerReadable(fd)
        }, opaqueSelf) else {
            close(fd)
            return logger.warning(
                "cannot connect a socket for a moved client", metadata: ["event": "steer_failed", "five_tuple": "\(to)"])
        }
        event_add(event, nil)
        listeners.append((fd, to.server, event))
        steered[to] = fd
        steeredAnswer[fd] = answer
    }
}
