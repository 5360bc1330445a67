import CLibevent
import CStreamIO
import Glibc

// A TCP or TLS connection in a live upgrade (docs/live-upgrade.md, "TCP clients", "TLS
// clients"): it pauses, and then either resumes here (the upgrade failed) or is let go, its
// socket living on in the heir. The owning loop's thread only.
extension StreamConnection {
    /// Stops reading and writing, after one last write, and returns what this process holds of
    /// the stream: the start of a frame read so far, the output the kernel has not taken, and
    /// for TLS the session's record state (`relayd_tls_records_export`). Nil, changing nothing,
    /// when the connection is not open, holds more than `HandoverStream.maxBytes`, or is a TLS
    /// session relayd cannot move: OpenSSL's (TLS 1.2, `tls-openssl-records`), or one that has
    /// not yet said whether it speaks TURN or HTTP (a port the API shares, docs/tls.md).
    func pauseForHandover() -> (input: [UInt8], output: [UInt8], records: SecretBytes?)? {
        guard state == .open, pipe == nil else { return nil }
        guard !isTLS || (ssl == nil && records != nil && (sawValidStun || !opening.api)) else { return nil }
        writeNow(onOwner: false)
        relayd_stream_io_lock(io)
        defer { relayd_stream_io_unlock(io) }
        let pending = relayd_stream_io_pending(io)
        guard state == .open, refusal == nil, pending + partialCount <= HandoverStream.maxBytes else { return nil }
        var recordState: SecretBytes?
        if let records {
            // Under the lock: no other loop seals a record after the sequence numbers are read.
            var bytes = [UInt8](repeating: 0, count: HandoverTLSSession.maxRecordBytes)
            let length = bytes.withUnsafeMutableBytes {
                relayd_tls_records_export(records, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count)
            }
            guard length > 0, pending + partialCount + length <= HandoverStream.maxBytes else {
                bytes.withUnsafeMutableBytes { relayd_tls_records_wipe($0.baseAddress, $0.count) }
                return nil
            }
            recordState = bytes.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[..<length])) }
            bytes.withUnsafeMutableBytes { relayd_tls_records_wipe($0.baseAddress, $0.count) }
        }
        handingOver = true
        if let readEvent { event_del(readEvent) }
        if let writeEvent { event_del(writeEvent) }
        let output =
            pending == 0
            ? [] : Array(UnsafeRawBufferPointer(start: io.pointee.output + io.pointee.output_start, count: pending))
        let input = partialCount == 0 ? [] : Array(UnsafeRawBufferPointer(rebasing: partial[..<partialCount]))
        return (input, output, recordState)
    }

    /// A session a live upgrade handed over goes on with the records `taken`
    /// (`relayd_tls_records_import`); before the loop runs, after its sealed output was queued.
    func adoptRecords(_ taken: OpaquePointer) {
        relayd_stream_io_lock(io)
        records = taken
        relayd_stream_io_unlock(io)
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
        if let records { relayd_tls_records_free(records) }
        records = nil
        releaseBuffersAndClose()
    }
}
