import RelayCore
import CLibevent
import COpenSSL
import CStreamIO
import Glibc
import Logging
import StunCodec

// The output queue: answers and relayed packets queued by any loop thread under the
// connection's lock (TLS: encrypted into a record each), and written in one send(2) at the end
// of the loop iteration of the thread that queued them (docs/architecture.md).
extension StreamConnection {
    /// What queuing a packet did.
    enum Queued {
        /// Queued; `schedule`: the caller's loop writes the socket at the end of its iteration.
        case queued(schedule: Bool)
        /// The connection is closing or refusing packets: dropped.
        case refused
    }

    /// Queues a framed packet (over TLS as one record), from any loop thread. Passing
    /// `StreamTransport.maxOutputBytes`, or a failure to queue, makes the connection refuse
    /// further packets until its owner closes it.
    func enqueue(_ bytes: UnsafeRawBufferPointer) -> Queued {
        guard let base = bytes.baseAddress else { return .refused }
        relayd_stream_io_lock(io)
        defer { relayd_stream_io_unlock(io) }
        guard state == .open || state == .draining, refusal == nil, !handingOver else { return .refused }
        let queued: Bool
        if let records {
            queued = relayd_tls_records_seal(records, io, base, bytes.count) == 0
        } else if let ssl {
            ERR_clear_error()
            queued = SSL_write(ssl, base, Int32(bytes.count)) == Int32(bytes.count)
        } else {
            queued = relayd_stream_io_append(io, base, bytes.count) == 0
        }
        let pending = relayd_stream_io_pending(io)
        if !queued {
            refusal = (.error, "cannot queue output")
            return .refused
        }
        if pending > StreamTransport.maxOutputBytes {
            refusal = (.slowReader, "\(pending) bytes unread")
            return .refused
        }
        guard !awaitingWrite, !waitingForSocket else { return .queued(schedule: false) }
        awaitingWrite = true
        return .queued(schedule: true)
    }

    /// Owning loop: closes the connection if queuing made it refuse packets.
    func closeIfRefusing() {
        relayd_stream_io_lock(io)
        let found = refusal
        relayd_stream_io_unlock(io)
        if let found { close(found.reason, detail: found.detail) }
    }

    /// Owning loop: puts the connection on its transport's end-of-iteration write list if it
    /// has output (a TLS handshake flight, say).
    func scheduleWrite() {
        relayd_stream_io_lock(io)
        let schedule = !awaitingWrite && !waitingForSocket && relayd_stream_io_pending(io) > 0
        if schedule { awaitingWrite = true }
        relayd_stream_io_unlock(io)
        if schedule { owner.noteUnflushed(self) }
    }

    /// Hands the socket what is queued in one send(2), from whichever loop put the connection
    /// on its write list (or the write event); what the socket does not take waits for the
    /// write event. Closing on a socket error or after draining is the owning loop's: another
    /// loop leaves both to it (its read event or sweep).
    func writeNow(onOwner: Bool) {
        relayd_stream_io_lock(io)
        awaitingWrite = false
        guard state != .closed, !handingOver else { return relayd_stream_io_unlock(io) }
        var failure: String? = nil
        if relayd_stream_io_flush(io, socket) < 0 {
            let error = errno
            if error != EAGAIN && error != EWOULDBLOCK { failure = String(cString: strerror(error)) }
        }
        let left = relayd_stream_io_pending(io) > 0
        if failure == nil, left != waitingForSocket {
            waitingForSocket = left
            // Not event_del: from another thread it waits for a running callback of the event,
            // which may be the owner's write callback waiting for this lock.
            if left { event_add(writeEvent, nil) } else { event_del_noblock(writeEvent) }
        }
        if let failure, refusal == nil { refusal = (.error, failure) }
        let drained = !left && state == .draining
        relayd_stream_io_unlock(io)
        guard onOwner else { return }
        if failure != nil {
            closeIfRefusing()
        } else if drained {
            close(drainReason)
        } else if pipe != nil {
            resumePeerIfDrained()
        }
    }

    /// Bytes queued and not yet taken by the kernel (TLS: ciphertext).
    var pendingOutput: Int {
        relayd_stream_io_lock(io)
        defer { relayd_stream_io_unlock(io) }
        return relayd_stream_io_pending(io)
    }
}
