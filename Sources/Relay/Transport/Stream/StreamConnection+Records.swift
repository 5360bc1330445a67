import CStreamIO
import COpenSSL

// A TLS 1.3 session's records after the handshake, kept by relayd instead of OpenSSL
// (`CStreamIO`'s `relayd_tls_records`; docs/tls.md, "After the handshake"): an idle session then
// holds two AEAD contexts instead of an `SSL` object. Every call holds the connection's lock, as
// OpenSSL's do: another loop may be sealing a record for it (`enqueue`).
extension StreamConnection {
    /// Under the lock, once `ssl`'s handshake completed: relayd takes the session's records over
    /// when it can (`relayd_tls_records_new`; `mark` is `io`'s byte count before the call that
    /// completed it). Otherwise OpenSSL keeps them, reading ahead from now on.
    func takeRecords(from ssl: OpaquePointer, queuedSince mark: UInt64) {
        let written = Int(truncatingIfNeeded: io.pointee.appended &- mark)
        if let taken = relayd_tls_records_new(ssl, io, written) {
            records = taken
            owner.counters.tlsOwnRecords &+= 1
        } else {
            SSL_set_read_ahead(ssl, 1)
        }
    }

    /// Frees the `SSL` object once the records were taken (after `handshakeCompleted` read what
    /// it needs from it: the server name, ALPN).
    func freeSessionOnceTaken() {
        guard records != nil, let ssl else { return }
        relayd_stream_io_lock(io)
        self.ssl = nil
        relayd_stream_io_unlock(io)
        SSL_free(ssl)
    }

    /// Opens the records in `io`'s input and delivers their frames (`deliverPlaintext`); an
    /// error queues its alert.
    func openRecords(_ records: OpaquePointer) {
        deliverPlaintext(room: Int(RELAYD_TLS_RECORDS_ROOM)) { into, space in
            relayd_stream_io_lock(io)
            defer { relayd_stream_io_unlock(io) }
            let result = relayd_tls_records_open(records, io, into.assumingMemoryBound(to: UInt8.self), space)
            if result > 0 { return .bytes(result) }
            if result == 0 { return .drained }
            if result == RELAYD_TLS_RECORDS_CLOSED { return .closed }
            return .failed(String(cString: relayd_tls_records_failure(records)))
        }
    }
}
