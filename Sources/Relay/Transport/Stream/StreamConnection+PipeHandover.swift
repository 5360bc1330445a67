import CLibevent
import CStreamIO
import Glibc

// An RFC 6062 pipe in a live upgrade (docs/live-upgrade.md, "RFC 6062 connections"): it pauses
// both ways, and then either goes on here (the upgrade failed) or is let go, its two sockets
// living on in the heir, which takes the bytes this process held. The owning loop's thread only.
extension StreamConnection {
    /// What a paused pipe held in user space.
    struct HeldPipe {
        /// The client's bytes not yet written to the peer; the last `unpaid` are not granted yet.
        var toPeer: [UInt8]
        var unpaid: Int
        /// The peer's bytes not yet written to the client.
        var toClient: [UInt8]
    }

    /// Writes what each side can take, then stops the pipe both ways and returns what it holds.
    /// Nil, changing nothing, when it cannot move: a TLS data connection, one that is closing,
    /// whose client has closed its side, or spliced in the kernel (its sockets stay in this
    /// process's sockmap, docs/tcp-relay.md).
    func pausePipeForHandover() -> HeldPipe? {
        guard !isTLS, state == .open, let pipe, !pipe.clientEnded, partialCount == 0, pipe.splice == nil
        else { return nil }
        writeNow(onOwner: false)
        guard pipe.writeBacklog() else { return nil }
        relayd_stream_io_lock(io)
        defer { relayd_stream_io_unlock(io) }
        guard state == .open, refusal == nil else { return nil }
        handingOver = true
        if let readEvent { event_del(readEvent) }
        if let writeEvent { event_del(writeEvent) }
        if let event = pipe.readEvent { event_del(event) }
        if let event = pipe.writeEvent { event_del(event) }
        if let timer = pipe.budgetTimer { event_del(timer) }
        let pending = relayd_stream_io_pending(io)
        let toClient =
            pending == 0
            ? [] : Array(UnsafeRawBufferPointer(start: io.pointee.output + io.pointee.output_start, count: pending))
        return HeldPipe(toPeer: Array(pipe.backlog[pipe.backlogStart...]), unpaid: pipe.unpaid, toClient: toClient)
    }

    /// The upgrade failed: the pipe goes on as its state says.
    func resumePipeAfterHandover() {
        relayd_stream_io_lock(io)
        handingOver = false
        let waiting = waitingForSocket
        relayd_stream_io_unlock(io)
        if waiting, let writeEvent { event_add(writeEvent, nil) }
        if let pipe {
            // The pause's last writes may have drained what held a side back.
            if pipe.clientPaused && pipe.pending < TCPPipe.resumeBytes { pipe.clientPaused = false }
            if pipe.peerPaused && pendingOutput < TCPPipe.resumeBytes { pipe.peerPaused = false }
            restartPipe(pipe)
            // A splice the pause put off is tried again.
            if pipe.splice == nil { armSpliceTimer(pipe, microseconds: 0) }
        }
        scheduleWrite()
    }

    /// A pipe the running relayd handed over, just started here (`startPipe`): the client's
    /// bytes it held wait for the peer's socket (those not granted yet wait for the budget),
    /// and the client is not read while they are over `TCPPipe.pauseBytes`.
    func restorePipe(toPeer: [UInt8], unpaid: Int) {
        guard let pipe else { return }
        if !toPeer.isEmpty { toPeer.withUnsafeBytes { pipe.keep($0) } }
        pipe.unpaid = min(max(unpaid, 0), pipe.pending)
        // Without a budget here (its allocation did not come), nothing waits for one.
        if pipe.account.budget == nil && pipe.unpaid > 0 {
            guard charge(.toPeer, pipe.unpaid, pipe) else { return }
            pipe.unpaid = 0
        }
        pipe.clientPaused = pipe.pending > TCPPipe.pauseBytes
        pipe.clientWaitsForBudget = pipe.unpaid > 0
        if pipe.clientPaused || pipe.clientWaitsForBudget, let readEvent { event_del(readEvent) }
        restartPipe(pipe)
    }

    /// The pipe's events as its state says: each side read unless something holds it back, the
    /// peer written while granted bytes wait, the budget's timer while a side waits for it.
    private func restartPipe(_ pipe: TCPPipe) {
        resumeClientIfReady(pipe)
        if !pipe.peerPaused && !pipe.peerWaitsForBudget, let event = pipe.readEvent { event_add(event, nil) }
        if pipe.paid > 0, let event = pipe.writeEvent { event_add(event, nil) }
        if pipe.clientWaitsForBudget || pipe.peerWaitsForBudget { armBudgetTimer(pipe) }
    }
}
