import CLibevent
import FastPath
import Glibc
import RelayCore

// An RFC 6062 pipe spliced in the kernel (docs/tcp-relay.md, "In the kernel"). Once ConnectionBind
// is answered and relayd holds nothing for either side, a plain-TCP pipe without `max-bps` puts
// both sockets in the sockmap of `relayd_tcp_splice`, whose verdict program moves most bytes from
// one socket's receive queue to the other's send queue without waking relayd. What the program
// passes instead (see `PipeSplice`) is read here and written on, after every byte it redirected
// before; a side whose target is full is not read, so its sender's TCP window closes as without
// the splice. The end of a side's stream closes the pipe once everything before it reached the
// target's send queue. The owning loop's thread only.
extension StreamConnection {
    /// Bytes in flight towards a side's target (in the kernel's queue, the target's send queue or
    /// the network) beyond which the program passes to relayd: a slow reader's backlog is
    /// bounded by this plus the socket buffers.
    static let spliceInFlightBytes: UInt32 = 4 << 20
    /// How long a side waits to look again at the kernel's queue for its target.
    static let spliceWaitMicroseconds = 2000
    /// How often a spliced pipe counts what the kernel redirected.
    static let spliceCountMicroseconds = 1_000_000

    /// Whether the pipe can be spliced: the program runs, the client speaks plain TCP (no kTLS
    /// here), the allocation has no `max-bps` (the program cannot pause a side), and it is not
    /// the API's.
    func maySplice(_ pipe: TCPPipe) -> Bool {
        owner.loop.splice != nil && ssl == nil && pipe.apiName == nil && pipe.account.budget == nil
    }

    /// After ConnectionBind: the splice is tried once the loop wrote the answer.
    func planSplice(_ pipe: TCPPipe) {
        guard maySplice(pipe) else { return }
        let me = Unmanaged.passUnretained(self).toOpaque()
        pipe.spliceTimer = event_new(owner.loop.base, -1, 0, { _, _, arg in
            Unmanaged<StreamConnection>.fromOpaque(arg!).takeUnretainedValue().spliceTimerFired()
        }, me)
        armSpliceTimer(pipe, microseconds: 0)
    }

    func armSpliceTimer(_ pipe: TCPPipe, microseconds: Int) {
        guard let timer = pipe.spliceTimer else { return }
        var delay = timeval(tv_sec: microseconds / 1_000_000, tv_usec: microseconds % 1_000_000)
        event_add(timer, &delay)
    }

    func spliceTimerFired() {
        guard let pipe, state == .open, !handingOver else { return }
        guard let splice = pipe.splice else { return trySplice(pipe) }
        countSpliced(pipe, splice)
        guard state == .open else { return }
        spliceProgress(0, pipe, splice)
        guard state == .open, pipe.splice != nil else { return }
        spliceProgress(1, pipe, splice)
        guard state == .open, pipe.splice != nil else { return }
        armSpliceTimer(pipe, microseconds: spliceWaiting(splice) ? Self.spliceWaitMicroseconds : Self.spliceCountMicroseconds)
    }

    /// Whether a side waits on the kernel: bytes held until its queue for the target drains, or
    /// the end of the source read while passed bytes are still on their way to the socket.
    private func spliceWaiting(_ splice: PipeSplice) -> Bool {
        splice.sides.contains { $0.count > 0 || $0.ended }
    }

    /// Puts the sockets in the sockmap once relayd holds nothing for either side; until then
    /// tries again, every 20 ms for a second, then every second.
    func trySplice(_ pipe: TCPPipe) {
        guard let kernel = owner.loop.splice, !pipe.clientEnded else { return }
        guard pendingOutput == 0, pipe.pending == 0, partialCount == 0, !pipe.clientPaused, !pipe.peerPaused else {
            pipe.spliceTries += 1
            return armSpliceTimer(pipe, microseconds: pipe.spliceTries < 50 ? 20_000 : 1_000_000)
        }
        guard let clientBase = KernelSplice.writtenBytes(socket), let peerBase = KernelSplice.writtenBytes(pipe.socket)
        else { return }
        let splice = PipeSplice(kernel: kernel, traffic: pipe.account.traffic)
        guard pipe.account.traffic.follow(splice) else { return }
        guard
            splice.start(
                client: socket, peer: pipe.socket, clientBase: clientBase, peerBase: peerBase,
                limit: Self.spliceInFlightBytes)
        else {
            pipe.account.traffic.forget(splice)
            return
        }
        pipe.splice = splice
        owner.counters.splicedPipes &+= 1
        // Bytes that arrived meanwhile are the program's to pass or redirect: read what it passed.
        spliceProgress(0, pipe, splice)
        guard state == .open, pipe.splice != nil else { return }
        spliceProgress(1, pipe, splice)
        guard state == .open, pipe.splice != nil else { return }
        armSpliceTimer(pipe, microseconds: Self.spliceCountMicroseconds)
    }

    /// A socket of a spliced pipe is readable or writable: both sides move on.
    func spliceEvent(_ pipe: TCPPipe, _ splice: PipeSplice) {
        guard state == .open else { return }
        spliceProgress(0, pipe, splice)
        guard state == .open, pipe.splice != nil else { return }
        spliceProgress(1, pipe, splice)
        guard state == .open, pipe.splice != nil else { return }
        if spliceWaiting(splice) { armSpliceTimer(pipe, microseconds: Self.spliceWaitMicroseconds) }
    }

    /// Moves side `index` (0: client to peer, 1: peer to client) as far as it can: writes what it
    /// holds once the kernel's queue for the target drained, reads what the program passed, and
    /// lets the program redirect again when nothing is held.
    func spliceProgress(_ index: Int, _ pipe: TCPPipe, _ splice: PipeSplice) {
        let (source, target) = index == 0 ? (socket, pipe.socket) : (pipe.socket, socket)
        let direction: BandwidthBudget.Direction = index == 0 ? .toPeer : .toClient
        let buffer = splice.buffer(index)
        while state == .open {
            if splice.sides[index].count > 0 {
                guard splice.drained(index, target: target) else { return holdSource(index, pipe) }
                let side = splice.sides[index]
                let written = send(target, buffer.baseAddress! + side.start, side.count, sendWithoutSignal)
                if written < 0 {
                    let error = errno
                    if error == EAGAIN || error == EWOULDBLOCK || error == EINTR { return waitForTarget(index, pipe) }
                    return close(index == 0 ? .peerClosed : .error, detail: String(cString: strerror(error)))
                }
                guard charge(direction, written, pipe) else { return }
                splice.wrote(written, index)
                splice.sides[index].start += written
                splice.sides[index].count -= written
                if splice.sides[index].count > 0 { return waitForTarget(index, pipe) }
                releaseSource(index, pipe)
            }
            if splice.sides[index].ended {
                // Everything before the end is in the target's send queue: the pipe closes, as
                // it does in user space (the kernel still sends what the queue holds).
                guard splice.drained(index, target: target) else { return }
                return close(index == 0 ? .clientClosed : .peerClosed)
            }
            let count = recv(source, buffer.baseAddress!, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 {
                if index == 0 { lastInputAt = EventLoop.now() }
                splice.sides[index].read &+= UInt64(count)
                splice.sides[index].start = 0
                splice.sides[index].count = count
                continue
            }
            if count == 0 {
                // The end, once every byte the program passed before it was read: some may still
                // be on the kernel's way to the socket's queue (the timer looks again).
                guard let passed = splice.passed(index), passed == splice.sides[index].read else { return }
                splice.sides[index].ended = true
                continue
            }
            let error = errno
            if error == EAGAIN || error == EWOULDBLOCK || error == EINTR { return splice.reopen(index) }
            return close(index == 0 ? .clientClosed : .peerClosed, detail: String(cString: strerror(error)))
        }
    }

    /// A side holds bytes its target cannot take yet: its source is not read meanwhile.
    private func holdSource(_ index: Int, _ pipe: TCPPipe) {
        event_del(index == 0 ? readEvent : pipe.readEvent)
    }

    private func waitForTarget(_ index: Int, _ pipe: TCPPipe) {
        holdSource(index, pipe)
        event_add(index == 0 ? pipe.writeEvent : writeEvent, nil)
    }

    private func releaseSource(_ index: Int, _ pipe: TCPPipe) {
        event_del(index == 0 ? pipe.writeEvent : writeEvent)
        event_add(index == 0 ? readEvent : pipe.readEvent, nil)
    }

    /// Counts what the kernel redirected since the last count, in the allocation's traffic and
    /// the loop's metrics; an allocation that ended closes the pipe (its end counted the rest).
    func countSpliced(_ pipe: TCPPipe, _ splice: PipeSplice) {
        let counted = splice.count()
        owner.loop.core.counters.tcpBytesToPeer &+= counted.toPeer
        owner.loop.core.counters.tcpBytesToClient &+= counted.toClient
        owner.counters.splicedBytesToPeer &+= counted.toPeer
        owner.counters.splicedBytesToClient &+= counted.toClient
        if counted.ended { close(.relayEnded) }
    }

    /// The pipe closes: its sockets leave the sockmap, and what the kernel redirected is counted
    /// one last time (the transport's release, before the sockets close).
    func endSplice() {
        guard let pipe, let splice = pipe.splice else { return }
        if !splice.sides.isEmpty {
            splice.kernel.unsplice(first: splice.first, client: socket, peer: pipe.socket)
            let counted = splice.count()
            owner.loop.core.counters.tcpBytesToPeer &+= counted.toPeer
            owner.loop.core.counters.tcpBytesToClient &+= counted.toClient
            owner.counters.splicedBytesToPeer &+= counted.toPeer
            owner.counters.splicedBytesToClient &+= counted.toClient
            splice.kernel.release(first: splice.first)
        }
        pipe.account.traffic.forget(splice)
    }
}
