import CLibevent
import CStreamIO
import Glibc

// A plain TCP connection in a live upgrade (docs/live-upgrade.md, "TCP clients"): it pauses, and
// then either resumes here (the upgrade failed) or is let go, its socket living on in the heir.
// The owning loop's thread only.
extension StreamConnection {
    /// Stops reading and writing, after one last write, and returns what this process holds of
    /// the stream: the start of a frame read so far, and the output the kernel has not taken.
    /// Nil, changing nothing, when the connection is not open or holds more than
    /// `HandoverStream.maxBytes` (it stays, and drains here).
    func pauseForHandover() -> (input: [UInt8], output: [UInt8])? {
        guard !isTLS, state == .open, pipe == nil else { return nil }
        writeNow(onOwner: false)
        relayd_stream_io_lock(io)
        defer { relayd_stream_io_unlock(io) }
        let pending = relayd_stream_io_pending(io)
        guard state == .open, refusal == nil, pending + partialCount <= HandoverStream.maxBytes else { return nil }
        handingOver = true
        if let readEvent { event_del(readEvent) }
        if let writeEvent { event_del(writeEvent) }
        let output =
            pending == 0
            ? [] : Array(UnsafeRawBufferPointer(start: io.pointee.output + io.pointee.output_start, count: pending))
        let input = partialCount == 0 ? [] : Array(UnsafeRawBufferPointer(rebasing: partial[..<partialCount]))
        return (input, output)
    }

    /// The upgrade failed: reading and writing go on.
    func resumeAfterHandover() {
        relayd_stream_io_lock(io)
        handingOver = false
        let waiting = waitingForSocket
        relayd_stream_io_unlock(io)
        if let readEvent { event_add(readEvent, nil) }
        if waiting, let writeEvent { event_add(writeEvent, nil) }
        scheduleWrite()
    }

    /// The heir serves the connection: this process frees what it holds and closes its copy of
    /// the socket, writing nothing (no FIN: the heir holds the socket open).
    func abandon() {
        transition(to: .closed)
        relayd_stream_io_lock(io)
        defer { relayd_stream_io_unlock(io) }
        freeEvents()
        releaseBuffersAndClose()
    }
}
