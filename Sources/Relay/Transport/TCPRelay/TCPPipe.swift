import RelayCore
import CLibevent
import Glibc

/// The peer side of a data connection after its ConnectionBind (RFC 6062 §5.4, §5.5): the peer
/// connection's socket and events, and the client's bytes the peer's socket has not taken yet.
/// Owned by the data connection's loop thread (docs/tcp-relay.md).
final class TCPPipe {
    let id: PeerConnectionID
    let socket: Int32
    /// The allocation's `max-bps` budget and piped-traffic count (shared with its loop).
    let account: PipeAccount
    var readEvent: OpaquePointer?
    var writeEvent: OpaquePointer?
    /// Fires at the start of the budget's next second while a side waits for it.
    var budgetTimer: OpaquePointer?
    /// Client bytes waiting for the peer's socket, from `backlogStart` on; the last `unpaid` of
    /// them are not granted by the budget yet and are not written until they are.
    var backlog: [UInt8] = []
    var backlogStart = 0
    var unpaid = 0
    /// Client reads stopped: the backlog passed `pauseBytes`.
    var clientPaused = false
    /// Client reads stopped: the budget towards the peer is spent (`unpaid` > 0).
    var clientWaitsForBudget = false
    /// Peer reads stopped: the client's queued output passed `pauseBytes`.
    var peerPaused = false
    /// Peer reads stopped: the budget towards the client is spent for this second.
    var peerWaitsForBudget = false
    /// The client closed its side: the connection ends once the backlog is written.
    var clientEnded = false
    /// Set for a pipe to the HTTP API on a shared port (`APIHandoff`): the address of its end,
    /// to forget when it closes. Its bytes are not relayed traffic and are not counted as such.
    var apiName: [UInt8]?
    /// Set once the pipe's sockets are spliced in the kernel (docs/tcp-relay.md, "In the kernel").
    var splice: PipeSplice?
    /// The splice's timer: its start, its waits for the kernel's queue, its counts.
    var spliceTimer: OpaquePointer?
    /// Starts tried while something was still held in user space.
    var spliceTries = 0

    /// Buffered bytes one side may hold for the other before the other's reads stop (the
    /// backpressure: a slow reader stalls its sender instead of growing memory).
    static let pauseBytes = 256 * 1024
    /// Reads resume once the buffered bytes fall below this.
    static let resumeBytes = 64 * 1024

    init(id: PeerConnectionID, socket: Int32, account: PipeAccount) {
        self.id = id
        self.socket = socket
        self.account = account
    }

    var pending: Int { backlog.count - backlogStart }
    /// Waiting bytes the budget granted: what may be written now.
    var paid: Int { pending - unpaid }

    /// Keeps `bytes` behind what is waiting; what the socket took already is dropped first once
    /// it passes `resumeBytes`, so the array stays within a few hundred KB however long the
    /// upload runs.
    func keep(_ bytes: UnsafeRawBufferPointer) {
        if backlogStart > 0 && (backlogStart == backlog.count || backlogStart >= TCPPipe.resumeBytes) {
            backlog.removeFirst(backlogStart)
            backlogStart = 0
        }
        backlog.append(contentsOf: bytes)
    }

    /// Writes what waits and is paid for; false on a socket error other than a full buffer.
    func writeBacklog() -> Bool {
        while paid > 0 {
            let written = backlog.withUnsafeBytes { raw in
                send(socket, raw.baseAddress! + backlogStart, paid, sendWithoutSignal)
            }
            if written < 0 { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR }
            backlogStart += written
        }
        if pending == 0 {
            backlog.removeAll(keepingCapacity: backlog.capacity <= TCPPipe.pauseBytes)
            backlogStart = 0
        }
        return true
    }

    /// Frees the events and closes the peer's socket.
    func free() {
        if let readEvent { event_free(readEvent) }
        if let writeEvent { event_free(writeEvent) }
        if let budgetTimer { event_free(budgetTimer) }
        if let spliceTimer { event_free(spliceTimer) }
        splice?.free()
        splice = nil
        spliceTimer = nil
        readEvent = nil
        writeEvent = nil
        budgetTimer = nil
        close(socket)
    }
}
