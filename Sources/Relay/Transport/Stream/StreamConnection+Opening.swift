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
                if let client = header.source {
                    var claimed = origin.fiveTuple
                    claimed.client = client
                    // Two connections with one 5-tuple would share one allocation's entry (a
                    // client reaching two balancers from one port, or a header that lies).
                    guard !owner.proxiedTuples.contains(claimed), owner.loop.core.allocation(for: claimed) == nil else {
                        return close(.badProxyHeader, detail: "\(claimed) is in use already")
                    }
                    origin.fiveTuple = claimed
                    owner.proxiedTuples.insert(claimed)
                    proxied = true
                }
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
        let kind = StreamOpening(firstByte: bytes[0])
        if opening.api, kind == .http {
            guard opening.plainHTTP else { return close(.unknownProtocol, detail: "HTTP in the clear; the API speaks HTTPS") }
            transition(to: .open)
            return startAPI(bytes)
        }
        if opening.apiOnly && !opening.tls {
            return close(.unknownProtocol, detail: "first byte \(bytes[0]) on the API's port")
        }
        switch (opening.tls, opening.plain) {
        case (true, false): startTLS(bytes)
        case (false, _): startPlain(bytes)
        case (true, true):
            switch kind {
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
        if holdsUnattributedSlot {
            owner.service.limiter.releaseUnattributed()
            holdsUnattributedSlot = false
        }
        if let refusal = owner.service.limiter.admit(client) {
            owner.counters.refused[refusal.rawValue] &+= 1
            close(.refused, detail: "refused after the PROXY header: \(refusal.label) for \(client)")
            return false
        }
        holdsLimiterSlot = true
        return true
    }

    /// The client speaks TLS: a session of the TLS context current now takes `bytes`.
    private func startTLS(_ bytes: UnsafeRawBufferPointer) {
        let tls = opening.apiOnly ? owner.service.apiTLS.value : owner.service.tls.value
        guard let context = tls, let session = SSL_new(context.context) else {
            return close(.unknownProtocol, detail: "TLS is not served")
        }
        guard Self.attach(session, to: io) else {
            SSL_free(session)
            return close(.error, detail: "no memory for the TLS session")
        }
        // The ALPN callback offers `http/1.1` to sessions the API may have (`TLSContext.selectALPN`).
        if opening.api { SSL_set_ex_data(session, 0, TLSContext.apiMarker) }
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
        decrypt(UnsafeRawBufferPointer(rebasing: cipher[..<bytes.count]))
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

// The HTTP API on a port TURN shares (docs/tls.md, "The API on the same port"): the connection
// becomes a pipe to the API's own listener (`APIHandoff`), carrying the plaintext both ways.
extension StreamConnection {
    /// Whether a TLS connection that may be the API's is: its ALPN is `http/1.1`, or, without
    /// ALPN, its first plaintext byte starts a request line. Checked on the first plaintext.
    func isAPIRequest(_ first: UInt8?) -> Bool {
        guard opening.api, !sawValidStun, pipe == nil, isTLS else { return false }
        if opening.apiOnly { return true }
        if let alpnIsHTTP { return alpnIsHTTP }
        return first.map { StreamOpening(firstByte: $0) == .http } ?? false
    }

    /// What a client of the API hears when the API cannot take its connection.
    static let serviceUnavailable = Array(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n".utf8)

    /// Joins the connection to the API's listener and passes `bytes` (the request so far) on.
    func startAPI(_ bytes: UnsafeRawBufferPointer) {
        opening.api = false
        guard let handoff = owner.service.apiHandoff, let (fd, name) = handoff.connect(for: origin.fiveTuple.client)
        else {
            // The API's backlog is full: the client hears so, and the connection closes.
            _ = Self.serviceUnavailable.withUnsafeBytes { enqueue($0) }
            scheduleWrite()
            return clientClosed(reason: .apiUnavailable)
        }
        let pipe = TCPPipe(id: PeerConnectionID(0), socket: fd, account: PipeAccount(traffic: PipedTraffic(), budget: nil))
        pipe.apiName = name
        owner.counters.apiConnections &+= 1
        guard startPipe(pipe) else { return close(.error, detail: "cannot register the API connection") }
        if bytes.count > 0 { pipeToPeer(bytes) }
    }
}
