import CLibevent
import Glibc
import RelayCore
import StunCodec

extension EventLoop {
    /// A mobile allocation of this loop moved from `from` to `to` (RFC 8016, docs/mobility.md).
    /// SO_REUSEPORT spreads clients over the loops by their 4-tuple, so the new 5-tuple's
    /// datagrams would land on any loop. A UDP socket bound to the server address and connected
    /// to the client wins the kernel's lookup for exactly that client: its datagrams come here
    /// (`UDPSocket.openSteered`; the group's selector, `relayd_attach_listener_selector`, never
    /// picks it for anyone else). The socket for `from` stops being read at once and closes at the
    /// end of the flush: answers already queued on it still leave, and its descriptor cannot be
    /// reused by the new socket in between. What the client sent on it before it moved and this
    /// loop had not read yet is carried over to the allocation's new 5-tuple (`carryOver`).
    func steer(from: FiveTuple, to: FiveTuple?) {
        var leftOver: [[UInt8]] = []
        if let fd = steered.removeValue(forKey: from) {
            steeredAnswer[fd] = nil
            if let index = listeners.firstIndex(where: { $0.fd == fd }) {
                event_free(listeners[index].event)
                listeners.remove(at: index)
            }
            if to != nil { leftOver = Self.readQueuedData(fd) }
            pendingClose.append(fd)
        }
        guard let to, to.transport == .udp, steered[to] == nil,
            let answer = listeners.first(where: { $0.address == to.server && steeredAnswer[$0.fd] == nil })?.fd
        else { return }
        if !leftOver.isEmpty {
            let origin = ClientOrigin(fiveTuple: to, socket: ClientSocket(descriptor: answer))
            carried.append(contentsOf: leftOver.map { ($0, origin) })
        }
        guard let fd = UDPSocket.openSteered(bound: to.server, connectedTo: to.client) else {
            return logger.warning(
                "cannot open a socket for a moved client", metadata: ["event": "steer_failed", "five_tuple": "\(to)"])
        }
        register(steered: fd, for: to, answer: answer)
    }

    /// Reads the moved client's connected socket `fd` a live upgrade handed over, as `steer`
    /// would have opened it: the client's datagrams, queued on it and to come, reach this loop.
    /// False when it cannot be (the socket is closed then).
    @discardableResult
    func adoptSteered(_ fd: Int32, for fiveTuple: FiveTuple) -> Bool {
        guard steered[fiveTuple] == nil,
            let answer = listeners.first(where: { $0.address == fiveTuple.server && steeredAnswer[$0.fd] == nil })?.fd
        else {
            close(fd)
            return false
        }
        return register(steered: fd, for: fiveTuple, answer: answer)
    }

    /// Reads `fd`, connected to `to`'s client, as one of this loop's listeners; answers leave by
    /// the listener `answer`.
    @discardableResult
    private func register(steered fd: Int32, for to: FiveTuple, answer: Int32) -> Bool {
        guard let event = event_new(base, fd, Int16(EV_READ | EV_PERSIST), { fd, _, arg in
            Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().listenerReadable(fd)
        }, opaqueSelf) else {
            close(fd)
            logger.warning(
                "cannot register a socket for a moved client", metadata: ["event": "steer_failed", "five_tuple": "\(to)"])
            return false
        }
        event_add(event, nil)
        listeners.append((fd, to.server, event))
        steered[to] = fd
        steeredAnswer[fd] = answer
        return true
    }

    /// The relayable datagrams still queued on a moved client's old socket: ChannelData and STUN
    /// indications (Send), which the client sent before its move. Requests stay behind: one
    /// answered at the new address would answer a transaction sent from the old one.
    static func readQueuedData(_ fd: Int32) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n < 0 { return out }
            guard n >= 4 else { continue }
            let channelData = buffer[0] & 0xC0 == 0x40
            let indication = buffer[0] & 0xC0 == 0 && (UInt16(buffer[0]) << 8 | UInt16(buffer[1])) & 0x0110 == 0x0010
            if channelData || indication { out.append(Array(buffer[0..<n])) }
        }
    }

    /// Hands the core what `steer` carried over from moved clients' old sockets, once the flush
    /// that moved them is done.
    func carryOver() {
        let items = carried
        carried.removeAll()
        let now = EventLoop.now()
        for (bytes, origin) in items {
            bytes.withUnsafeBytes { core.handleClientPacket($0, from: origin, now: now) }
            if core.outbox.needsFlush { flush() }
        }
        flush()
    }
}
