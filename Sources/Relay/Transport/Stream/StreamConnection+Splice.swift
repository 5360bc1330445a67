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
// target's send queue. Waits on the kernel's queues, which no event announces, look again on a
// timer from 2 ms, doubling to 64 ms while nothing moves. The owning loop's thread only.
extension StreamConnection {
    /// Bytes a side's target may hold (its send queue and the kernel's queue in front of it)
    /// beyond which the program passes to relayd, whatever the target's send buffer allows.
    static let spliceInFlightBytes: UInt32 = 4 << 20
    /// How often a spliced pipe counts what the kernel redirected.
    static let spliceCountMicroseconds = 1_000_000

    /// Whether the pipe can be spliced: the program runs, the client speaks plain TCP (no kTLS
    /// here), the allocation has no `max-bps` (the program cannot pause a side), and it is not
    /// the API's.
    func maySplice(_ pipe: TCPPipe) -> Bool {
        owner.loop.splice != nil && !isTLS && pipe.apiName == nil && pipe.account.budget == nil
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
        moveSplicedSides(pipe, splice)
        guard state == .open, pipe.splice != nil else { return }
        if spliceWaiting(splice) {
            armSpliceTimer(pipe, microseconds: splice.waitMicroseconds)
            splice.waitMicroseconds = min(splice.waitMicroseconds * 2, PipeSplice.longestWait)
        } else {
            splice.waitMicroseconds = PipeSplice.firstWait
            armSpliceTimer(pipe, microseconds: Self.spliceCountMicroseconds)
        }
    }

    /// Whether a side waits on the kernel, which no descriptor event announces: its queue to the
    /// target to drain, or passed bytes to reach the source's socket before its end.
    private func spliceWaiting(_ splice: PipeSplice) -> Bool { splice.sides.contains { $0.waits } }

    /// Puts the sockets in the sockmap once relayd holds nothing for either side; until then
    /// tries again, every 20 ms for a second, then every second.
    func trySplice(_ pipe: TCPPipe) {
        guard let kernel = owner.loop.splice, !pipe.clientEnded else { return }
        guard pendingOutput == 0, pipe.pending == 0, partialCount == 0, !pipe.clientPaused, !pipe.peerPaused,
            KernelSplice.ready(socket), KernelSplice.ready(pipe.socket)
        else {
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
        spliceEvent(pipe, splice)
        guard state == .open, pipe.splice != nil, !spliceWaiting(splice) else { return }
        armSpliceTimer(pipe, microseconds: Self.spliceCountMicroseconds)
    }

    /// A socket of a spliced pipe is readable or writable: both sides move on.
    func spliceEvent(_ pipe: TCPPipe, _ splice: PipeSplice) {
        guard state == .open else { return }
        moveSplicedSides(pipe, splice)
        guard state == .open, pipe.splice != nil, spliceWaiting(splice) else { return }
        splice.waitMicroseconds = PipeSplice.firstWait
        armSpliceTimer(pipe, microseconds: splice.waitMicroseconds)
    }

    private func moveSplicedSides(_ pipe: TCPPipe, _ splice: PipeSplice) {
        spliceProgress(0, pipe, splice)
        guard state == .open, pipe.splice != nil else { return }
        spliceProgress(1, pipe, splice)
    }

    /// Moves side `index` (0: client to peer, 1: peer to client) as far as it can: writes what it
    /// holds once the kernel's queue for the target drained, reads what the program passed
    /// (counted as it is read, as a pipe in user space counts before passing on), and lets the
    /// program redirect again when nothing is held. A side that holds bytes, or waits at the
    /// end of its stream, does not read its source meanwhile.
    func spliceProgress(_ index: Int, _ pipe: TCPPipe, _ splice: PipeSplice) {
        let (source, target) = index == 0 ? (socket, pipe.socket) : (pipe.socket, socket)
        let direction: BandwidthBudget.Direction = index == 0 ? .toPeer : .toClient
        splice.sides[index].waits = false
        while state == .open {
            if splice.sides[index].count > 0 {
                guard splice.drained(index, target: target) else { return waitOnKernel(index, pipe, splice) }
                let buffer = splice.buffer(index)
                let side = splice.sides[index]
                guard let written = writeSpliced(target, buffer.baseAddress! + side.start, side.count, index) else { return }
                splice.wrote(written, index)
                splice.sides[index].start += written
                splice.sides[index].count -= written
                if splice.sides[index].count > 0 { return waitForTarget(index, pipe) }
                releaseSource(index, pipe)
                // Caught up with what the program passed: it may redirect again at once.
                splice.reopen(index)
            }
            if splice.sides[index].ended {
                // Everything before the end is in the target's send queue: the pipe closes, as
                // it does in user space (the kernel still sends what that queue holds).
                guard splice.drained(index, target: target) else { return waitOnKernel(index, pipe, splice) }
                return close(index == 0 ? .clientClosed : .peerClosed)
            }
            let buffer = owner.cipherBuffer
            let count = recv(source, buffer.baseAddress!, min(buffer.count, PipeSplice.bufferBytes), Int32(MSG_DONTWAIT))
            if count > 0 {
                if splice.broken(index) { return close(.error, detail: Self.brokenSplice) }
                if index == 0 { lastInputAt = EventLoop.now() }
                splice.sides[index].read &+= UInt64(count)
                guard charge(direction, count, pipe) else { return }
                var written = 0
                if splice.drained(index, target: target) {
                    guard let sent = writeSpliced(target, buffer.baseAddress!, count, index) else { return }
                    splice.wrote(sent, index)
                    written = sent
                    if written == count {
                        splice.reopen(index)
                        continue
                    }
                }
                // Kept until the kernel's queue drained or the target takes them.
                let kept = splice.buffer(index)
                kept.baseAddress!.copyMemory(from: buffer.baseAddress! + written, byteCount: count - written)
                splice.sides[index].start = 0
                splice.sides[index].count = count - written
                continue
            }
            if count == 0 {
                // The end, once every byte the program passed before it was read: some may still
                // be on the kernel's way to the socket's queue.
                guard splice.readAllPassed(index) else { return waitOnKernel(index, pipe, splice) }
                splice.sides[index].ended = true
                continue
            }
            let error = errno
            if error == EAGAIN || error == EWOULDBLOCK || error == EINTR {
                // Nothing held: the source is read again as it gets bytes (after a wait at its
                // end, its read event was off).
                releaseSource(index, pipe)
                return splice.reopen(index)
            }
            return close(index == 0 ? .clientClosed : .peerClosed, detail: String(cString: strerror(error)))
        }
    }

    /// Writes to a side's target: the bytes taken (0 when it is full, the side then waits for
    /// it), or nil with the pipe closed on an error.
    private func writeSpliced(_ target: Int32, _ bytes: UnsafeRawPointer, _ count: Int, _ index: Int) -> Int? {
        let written = send(target, bytes, count, sendWithoutSignal)
        if written >= 0 { return written }
        let error = errno
        if error == EAGAIN || error == EWOULDBLOCK || error == EINTR { return 0 }
        close(index == 0 ? .peerClosed : .error, detail: String(cString: strerror(error)))
        return nil
    }

    /// The side waits on the kernel (the timer looks again); its source is not read meanwhile.
    private func waitOnKernel(_ index: Int, _ pipe: TCPPipe, _ splice: PipeSplice) {
        splice.sides[index].waits = true
        holdSource(index, pipe)
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
        addSplicedMetrics(toPeer: counted.toPeer, toClient: counted.toClient)
        owner.counters.splicedOldBytes &+= counted.old
        if counted.ended { return close(.relayEnded) }
        if splice.broken(0) || splice.broken(1) { close(.error, detail: Self.brokenSplice) }
    }

    /// Why a pipe closes whose program could not take a retransmitted segment's old bytes out.
    static let brokenSplice = "the kernel handed over retransmitted bytes it could not take out"

    private func addSplicedMetrics(toPeer: UInt64, toClient: UInt64) {
        owner.loop.core.counters.tcpBytesToPeer &+= toPeer
        owner.loop.core.counters.tcpBytesToClient &+= toClient
        owner.counters.splicedBytesToPeer &+= toPeer
        owner.counters.splicedBytesToClient &+= toClient
    }

    /// The pipe closes: its sockets leave the sockmap, and what the kernel redirected is counted
    /// one last time (the transport's release, before the sockets close).
    func endSplice() {
        guard let pipe, let splice = pipe.splice else { return }
        let counted = splice.finish()
        addSplicedMetrics(toPeer: counted.toPeer, toClient: counted.toClient)
        owner.counters.splicedOldBytes &+= counted.old
    }
}
