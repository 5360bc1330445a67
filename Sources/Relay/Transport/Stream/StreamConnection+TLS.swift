import RelayCore
import CLibevent
import COpenSSL
import CStreamIO
import Glibc
import Logging
import StunCodec

// The TLS session (OpenSSL over the memory BIO of `CStreamIO`): the handshake, decryption of
// what the socket read, and the errors OpenSSL reports. Every OpenSSL call on the session holds
// the connection's lock: another loop may be encrypting a record for it (`enqueue`). A TLS 1.3
// session's records are relayd's own once the handshake is done (`StreamConnection+Records.swift`).
extension StreamConnection {
    /// Feeds `ciphertext` to TLS: the handshake first, then records decrypted into the frame
    /// buffer (behind any partial frame) and delivered, also when the buffer fills up.
    /// Each TLS call holds the lock (another loop may be writing records); the frames are
    /// delivered without it (answers to them are queued under it).
    func decrypt(_ ciphertext: UnsafeRawBufferPointer) {
        io.pointee.input = ciphertext.baseAddress!.assumingMemoryBound(to: UInt8.self)
        io.pointee.input_length = ciphertext.count
        defer {
            io.pointee.input = nil
            io.pointee.input_length = 0
        }
        if state == .handshaking, let ssl {
            relayd_stream_io_lock(io)
            ERR_clear_error()
            let mark = io.pointee.appended
            let result = SSL_do_handshake(ssl)
            let error = result == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl, result)
            let waiting = error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE
            let detail = result == 1 || waiting ? nil : tlsErrorDetail(error)
            if result == 1 { takeRecords(from: ssl, queuedSince: mark) }
            relayd_stream_io_unlock(io)
            if let detail { return close(.tlsHandshakeFailed, detail: detail) }
            guard result == 1 else { return }
            handshakeCompleted()
            freeSessionOnceTaken()
        }
        if let records { return openRecords(records) }
        guard let ssl else { return }
        deliverPlaintext(room: 1) { into, space in
            relayd_stream_io_lock(io)
            defer { relayd_stream_io_unlock(io) }
            ERR_clear_error()
            let result = SSL_read(ssl, into, Int32(clamping: space))
            if result > 0 { return .bytes(Int(result)) }
            let error = SSL_get_error(ssl, result)
            if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return .drained }
            return error == SSL_ERROR_ZERO_RETURN ? .closed : .failed(tlsErrorDetail(error))
        }
    }

    /// What one read of plaintext from TLS gave.
    enum PlaintextRead {
        case bytes(Int)
        /// The ciphertext read so far is used up.
        case drained
        /// The client's close_notify.
        case closed
        case failed(String)
    }

    /// Reads plaintext with `read` (into the room it is given, at least `room` bytes) into the
    /// frame buffer behind any partial frame, and delivers the frames, also when the buffer fills
    /// up; close_notify ends the client's side, an error closes the connection.
    func deliverPlaintext(room: Int, _ read: (UnsafeMutableRawPointer, Int) -> PlaintextRead) {
        let frames = owner.frameBuffer
        var count = restorePartial(into: frames)
        while state == .open {
            if frames.count - count < room {
                deliverFrames(in: frames, count: count)
                count = restorePartial(into: frames)
                continue
            }
            switch read(frames.baseAddress! + count, frames.count - count) {
            case .bytes(let read):
                count += read
            case .drained:
                return deliverFrames(in: frames, count: count)
            case .closed:
                deliverFrames(in: frames, count: count)
                return pipe == nil ? clientClosed() : pipeClientEnded()
            case .failed(let detail):
                deliverFrames(in: frames, count: count)
                return close(.error, detail: detail)
            }
        }
    }

    func handshakeCompleted() {
        guard state == .handshaking else { return }
        transition(to: .open)
        handshakeDone = true
        owner.handshakeCompleted()
        readyAt = EventLoop.now()
        lastInputAt = readyAt
        noteServerNameTenant()
        guard let ssl else { return }
        var alpn: UnsafePointer<UInt8>? = nil
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &alpn, &alpnLength)
        let selected = alpn.map { UnsafeBufferPointer(start: $0, count: Int(alpnLength)) }
        if let selected, !selected.isEmpty { alpnIsHTTP = selected.elementsEqual(TLSContext.httpALPN) }
        guard owner.logger.logLevel <= .debug else { return }
        let sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { LogSafe.text(String(cString: $0)) }
        let protocolID = selected.map { String(decoding: $0, as: UTF8.self) }
        let cipher = SSL_get_current_cipher(ssl).flatMap { SSL_CIPHER_get_name($0) }.map { String(cString: $0) }
        owner.logger.debug(
            "TLS handshake completed",
            metadata: [
                "event": "tls_handshake", "five_tuple": "\(origin.fiveTuple)", "sni": "\(sni ?? "-")",
                "alpn": "\(protocolID ?? "-")", "version": "\(String(cString: SSL_get_version(ssl)))",
                "cipher": "\(cipher ?? "-")", "records": "\(records != nil ? "relayd" : "openssl")",
            ])
    }

    /// The tenant the client's server name (SNI, RFC 6066 §3) names goes with every message of
    /// the connection (docs/tenants.md).
    private func noteServerNameTenant() {
        guard let ssl, let tenants = owner.loop.core?.context.tenants, tenants.isMultiTenant,
            let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name),
            let index = tenants.tenant(serverName: String(cString: name))
        else { return }
        origin.serverNameTenant = UInt16(clamping: index)
    }

    /// OpenSSL's reasons for the failed call (this thread's error queue), or the socket error.
    func tlsErrorDetail(_ error: Int32) -> String {
        if ERR_peek_error() != 0 { return TLSContext.drainErrors() }
        if error == SSL_ERROR_SYSCALL, errno != 0 { return String(cString: strerror(errno)) }
        return "SSL error \(error)"
    }
}
