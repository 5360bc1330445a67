import RelayCore
import CLibevent
import Glibc

// A data connection joined with a peer connection by ConnectionBind (RFC 6062 §5.4, §5.5):
// from then on it carries raw bytes both ways, no STUN. What the client sends (decrypted, for
// TLS) goes to the peer's socket; what the peer sends is queued on the connection like any
// output (one TLS record per read). Each side's buffered bytes are bounded: past
// `TCPPipe.pauseBytes` the other side's reads stop until they drain (docs/tcp-relay.md).
// Each direction is charged to the allocation's `max-bps` budget and counted in its piped
// traffic before it is passed on (`StreamConnection+PipeBudget.swift`).
// The owning loop's thread only.
extension StreamConnection {
    /// Starts piping to `peerSocket`; false if its events cannot be registered.
    func startPipe(id: PeerConnectionID, peerSocket: PeerSocket, account: PipeAccount) -> Bool {
        startPipe(TCPPipe(id: id, socket: peerSocket.descriptor, account: account))
    }

    /// Starts piping to `pipe`'s socket; false if its events cannot be registered.
    func startPipe(_ pipe: TCPPipe) -> Bool {
        let me = Unmanaged.passUnretained(self).toOpaque()
        pipe.readEvent = event_new(owner.loop.base, pipe.socket, Int16(EV_READ | EV_PERSIST), { _, _, arg in
            Unmanaged<StreamConnection>.fromOpaque(arg!).takeUnretainedValue().peerReadable()
        }, me)
        pipe.writeEvent = event_new(owner.loop.base, pipe.socket, Int16(EV_WRITE | EV_PERSIST), { _, _, arg in
            Unmanaged<StreamConnection>.fromOpaque(arg!).takeUnretainedValue().peerWritable()
        }, me)
        if pipe.account.budget != nil {
            pipe.budgetTimer = event_new(owner.loop.base, -1, 0, { _, _, arg in
                Unmanaged<StreamConnection>.fromOpaque(arg!).takeUnretainedValue().budgetRefilled()
            }, me)
        }
        self.pipe = pipe
        guard pipe.readEvent != nil, pipe.writeEvent != nil, pipe.account.budget == nil || pipe.budgetTimer != nil
        else { return false }
        event_add(pipe.readEvent, nil)
        planSplice(pipe)
        return true
    }

    /// Client bytes to the peer: what the budget grants is counted and written at once when
    /// nothing waits, the rest kept. Past `pauseBytes` kept, or with bytes the budget did not
    /// grant, the client is not read until the peer takes them or the budget allows them.
    func pipeToPeer(_ bytes: UnsafeRawBufferPointer) {
        guard let pipe, bytes.count > 0 else { return }
        // Bytes behind unpaid ones wait their turn: what is paid is always a prefix.
        let granted = pipe.unpaid > 0 ? 0 : grant(.toPeer, upTo: bytes.count, pipe)
        guard charge(.toPeer, granted, pipe) else { return }
        var rest = bytes
        if pipe.pending == 0 && granted > 0 {
            let written = send(pipe.socket, bytes.baseAddress!, granted, sendWithoutSignal)
            if written < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
                return close(.peerClosed, detail: String(cString: strerror(errno)))
            }
            rest = UnsafeRawBufferPointer(rebasing: bytes[max(0, written)...])
        }
        guard rest.count > 0 else { return }
        pipe.keep(rest)
        pipe.unpaid += bytes.count - granted
        if pipe.paid > 0 { event_add(pipe.writeEvent, nil) }
        if pipe.unpaid > 0 && !pipe.clientWaitsForBudget {
            pipe.clientWaitsForBudget = true
            event_del(readEvent)
            armBudgetTimer(pipe)
        }
        if pipe.pending > TCPPipe.pauseBytes && !pipe.clientPaused {
            pipe.clientPaused = true
            event_del(readEvent)
        }
    }

    /// The peer's socket can take more: the kept client bytes go; below `resumeBytes` the client
    /// is read again; a client that closed its side is closed once all is written.
    func peerWritable() {
        guard let pipe else { return }
        if let splice = pipe.splice { return spliceEvent(pipe, splice) }
        // Draining towards the client (the peer closed) or closed: nothing more goes to the peer,
        // and a persistent write event left added would fire on every loop iteration.
        guard state == .open else {
            event_del(pipe.writeEvent)
            return
        }
        guard pipe.writeBacklog() else { return close(.peerClosed, detail: String(cString: strerror(errno))) }
        if pipe.paid == 0 {
            event_del(pipe.writeEvent)
            if pipe.pending == 0 && pipe.clientEnded {
                if pipe.apiName != nil { return _ = shutdown(pipe.socket, Int32(SHUT_WR)) }
                return close(.clientClosed)
            }
        }
        if pipe.clientPaused && pipe.pending < TCPPipe.resumeBytes {
            pipe.clientPaused = false
            resumeClientIfReady(pipe)
        }
    }

    /// Reads the client again unless something else still holds it back.
    func resumeClientIfReady(_ pipe: TCPPipe) {
        guard state == .open, !pipe.clientPaused, !pipe.clientWaitsForBudget, !pipe.clientEnded else { return }
        event_add(readEvent, nil)
    }

    /// The client closed its side: what it sent still goes to the peer, then both close.
    func pipeClientEnded() {
        guard let pipe else { return }
        if pipe.apiName != nil {
            // The HTTP API answers what it was sent: its side is half-closed once all of it went,
            // and the connection ends when the API closes (`peerReadable`).
            pipe.clientEnded = true
            event_del(readEvent)
            if pipe.pending == 0 { shutdown(pipe.socket, Int32(SHUT_WR)) }
            return
        }
        if pipe.pending == 0 { return close(.clientClosed) }
        pipe.clientEnded = true
        event_del(readEvent)
    }

    /// Peer bytes to the client, one read(2) at a time of at most what the budget grants, while
    /// the client's queued output stays under `pauseBytes`; the peer closing ends the connection
    /// once its output is written.
    func peerReadable() {
        guard let pipe else { return }
        if let splice = pipe.splice { return spliceEvent(pipe, splice) }
        guard state == .open else {
            event_del(pipe.readEvent)
            return
        }
        if pendingOutput > TCPPipe.pauseBytes { return pausePeer(pipe) }
        let buffer = owner.cipherBuffer
        let granted = grant(.toClient, upTo: buffer.count, pipe)
        if granted == 0 { return peerWaitsForBudget(pipe) }
        let count = read(pipe.socket, buffer.baseAddress!, granted)
        if count < granted { refund(.toClient, granted - max(count, 0), pipe) }
        if count <= 0 {
            if count < 0 {
                let error = errno
                if error == EAGAIN || error == EWOULDBLOCK || error == EINTR { return }
                return close(.peerClosed, detail: String(cString: strerror(error)))
            }
            // The peer is done: what it sent still goes to the client, then both close.
            event_del(pipe.readEvent)
            return clientClosed(reason: .peerClosed)
        }
        guard charge(.toClient, count, pipe) else { return }
        switch enqueue(UnsafeRawBufferPointer(rebasing: buffer[..<count])) {
        case .queued(let schedule):
            if schedule { owner.noteUnflushed(self) }
        case .refused:
            return closeIfRefusing()
        }
        if pendingOutput > TCPPipe.pauseBytes { pausePeer(pipe) }
    }

    private func pausePeer(_ pipe: TCPPipe) {
        guard !pipe.peerPaused else { return }
        pipe.peerPaused = true
        event_del(pipe.readEvent)
    }

    /// After a write to the client: a paused peer is read again once the output drained below
    /// `resumeBytes`.
    func resumePeerIfDrained() {
        guard let pipe, pipe.peerPaused, state == .open, pendingOutput < TCPPipe.resumeBytes else { return }
        pipe.peerPaused = false
        if !pipe.peerWaitsForBudget { event_add(pipe.readEvent, nil) }
    }
}
