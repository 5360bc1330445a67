import CLibevent
import COpenSSL
import CStreamIO
import Glibc
import RelayCore
import StunCodec

// A connection's first bytes (docs/tls.md, "One port for everything" and "Behind a load
// balancer"): a PROXY protocol header from a balancer `proxy-protocol-from` lists, then, on a
// port TLS and TCP share, the byte that says which of them the client speaks. Until then the
// connection is `sniffing`, bounded by `tls-handshake-timeout`. The owning loop's thread only.
extension StreamConnection {
    /// One read(2) while sniffing, behind the part of a PROXY header kept from the last one.
    func readOpening() {
        let buffer = owner.frameBuffer
        let offset = restorePartial(into: buffer)
        // No more than the cipher buffer holds: a TLS client's first bytes move there.
        let room = owner.cipherBuffer.count - offset
        let count = Glibc.read(socket, buffer.baseAddress! + offset, room)
        if count <= 0 {
            if count < 0 {
                let error = errno
                if error == EAGAIN || error == EWOULDBLOCK || error == EINTR {
                    return keepPartial(UnsafeRawBufferPointer(rebasing: buffer[..<offset]))
                }
                return close(.error, detail: String(cString: strerror(error)))
            }
            return clientClosed()
        }
        lastInputAt = EventLoop.now()
        open(UnsafeRawBufferPointer(rebasing: buffer[..<(offset + count)]))
    }

    /// Takes `bytes` (in the loop's frame buffer) as the connection's first: a PROXY header if
    /// one may come, then the protocol.
    private func open(_ bytes: UnsafeRawBufferPointer) {
        var bytes = bytes
        if bytes[0] == ProxyHeader.signature[0] {
            guard opening.proxyHeader else {
                return close(.badProxyHeader, detail: "from \(origin.fiveTuple.client.ip), which proxy-protocol-from does not list")
            }
            switch ProxyHeader.parse(bytes) {
            case .needMore:
                return keepPartial(bytes)
            case .invalid(let reason):
                return close(.badProxyHeader, detail: reason)
            case .header(let header, let length):
                if let client = header.source { origin.fiveTuple.client = client }
                opening.proxyHeader = false
                guard admitClient() else { return }
                bytes = UnsafeRawBufferPointer(rebasing: bytes[length...])
                if bytes.isEmpty { return }
            }
        }
        // A balancer's connection without a header is its own (a health check, say).
        if opening.proxyHeader {
            opening.proxyHeader = false
            guard admitClient() else { return }
        }
        switch (opening.tls, opening.plain) {
        case (true, false): startTLS(bytes)
        case (false, _): startPlain(bytes)
        case (true, true):
            switch StreamOpening(firstByte: bytes[0]) {
            case .tls: startTLS(bytes)
            case .stun: startPlain(bytes)
            case let other:
                close(.unknownProtocol, detail: "first byte \(bytes[0]) (\(other))")
            }
        }
    }

    /// A connection from a balancer `proxy-protocol-from` lists meets the connection limits
    /// once its header said whose it is: the client the header names (also in its 5-tuple:
    /// XOR-MAPPED-ADDRESS, peer policy, logs), or, for a LOCAL header or none, the balancer.
    /// Counted against the balancer's address at accept, it would share one source's caps
    /// among every client behind it. False, closed and counted, when the limits refuse it.
    private func admitClient() -> Bool {
        let client = origin.fiveTuple.client.ip
        if let refusal = owner.service.limiter.admit(client) {
            owner.counters.refused[refusal.rawValue] &+= 1
            close(.error, detail: "refused after the PROXY header: \(refusal.label) for \(client)")
            return false
        }
        holdsLimiterSlot = true
        return true
    }

    /// The client speaks TLS: a session of the TLS context current now takes `bytes`.
    private func startTLS(_ bytes: UnsafeRawBufferPointer) {
        guard let context = owner.service.tls.value, let session = SSL_new(context.context) else {
            return close(.unknownProtocol, detail: "TLS is not served")
        }
        guard Self.attach(session, to: io) else {
            SSL_free(session)
            return close(.error, detail: "no memory for the TLS session")
        }
        relayd_stream_io_lock(io)
        ssl = session
        relayd_stream_io_unlock(io)
        origin.fiveTuple.transport = .tls
        handshakeDone = false
        transition(to: .handshaking)
        if opening.plain { owner.counters.accepted[Int(TransportProtocol.tls.rawValue)] &+= 1 }
        // `decrypt` writes plaintext into the frame buffer, where these bytes are now.
        let cipher = owner.cipherBuffer
        cipher.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        decrypt(session, UnsafeRawBufferPointer(rebasing: cipher[..<bytes.count]))
        scheduleWrite()
    }

    /// The client speaks STUN and ChannelData in the clear: `bytes` are its first frames.
    private func startPlain(_ bytes: UnsafeRawBufferPointer) {
        transition(to: .open)
        readyAt = EventLoop.now()
        if opening.tls { owner.counters.accepted[Int(TransportProtocol.tcp.rawValue)] &+= 1 }
        let frames = owner.frameBuffer
        let count = bytes.count
        if bytes.baseAddress != UnsafeRawPointer(frames.baseAddress!) {
            memmove(frames.baseAddress!, bytes.baseAddress!, count)
        }
        deliverFrames(in: frames, count: count)
    }
}
