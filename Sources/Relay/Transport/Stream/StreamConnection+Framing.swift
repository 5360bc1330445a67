import RelayCore
import CLibevent
import COpenSSL
import CStreamIO
import Glibc
import Logging
import StunCodec

// Input: one read(2) per readable event, then the byte stream cut into STUN messages and
// ChannelData (RFC 8489 §6.2.2, RFC 8656 §12.5) for the core; a frame cut off by the end of a
// read waits in `partial` for its rest. The owning loop's thread only.
extension StreamConnection {
    /// One read(2) of what the socket holds; for TLS, the handshake or decryption of it; then
    /// every whole frame to the core.
    func readable() {
        if state == .sniffing { return readOpening() }
        if let pipe, let splice = pipe.splice { return spliceEvent(pipe, splice) }
        guard state == .open || state == .handshaking else { return }
        let tls = isTLS
        let buffer = tls ? owner.cipherBuffer : owner.frameBuffer
        // TCP reads behind the kept part frame, which is copied in front once the read succeeded.
        let offset = tls ? 0 : partialCount
        let count = Glibc.read(socket, buffer.baseAddress! + offset, buffer.count - offset)
        if count <= 0 {
            if count < 0 {
                let error = errno
                if error == EAGAIN || error == EWOULDBLOCK || error == EINTR { return }
                return close(.error, detail: String(cString: strerror(error)))
            }
            return pipe == nil ? clientClosed() : pipeClientEnded()
        }
        lastInputAt = EventLoop.now()
        buffersReleased = false
        if tls {
            decrypt(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            scheduleWrite()  // what TLS wrote itself: a handshake flight, session tickets, a KeyUpdate
        } else {
            _ = restorePartial(into: owner.frameBuffer)
            deliverFrames(in: owner.frameBuffer, count: offset + count)
        }
    }

    /// Hands each whole frame in `buffer[..<count]` to the core, writes what it queued (relayed
    /// payloads are sent straight from these bytes), and keeps a trailing part frame.
    func deliverFrames(in buffer: UnsafeMutableRawBufferPointer, count: Int) {
        if pipe != nil { return pipeToPeer(UnsafeRawBufferPointer(rebasing: buffer[..<count])) }
        if opening.api, count > 0, isAPIRequest(buffer[0]) {
            return startAPI(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }
        let loop = owner.loop
        let now = EventLoop.now()
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<count])
        var consumed = 0
        while state == .open {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[consumed...])
            let frame: StreamFramer.Frame?
            do {
                frame = try StreamFramer.nextFrame(in: rest)
            } catch {
                loop.core.counters.drop(.malformed)
                close(.badFrame, detail: "\(error)")
                break
            }
            guard let frame else { break }
            let message = UnsafeRawBufferPointer(rebasing: rest[..<frame.length])
            if !sawValidStun, frame.kind == .stun, (try? StunMessage(parsing: message)) != nil {
                sawValidStun = true
            }
            loop.core.handleClientPacket(message, from: origin, now: now)
            consumed += frame.length
            // A ConnectionBind that succeeded turns the connection into a pipe at the flush
            // (RFC 6062 §5.4): what follows it in this read is the client's first data.
            if frame.kind == .stun && !hasAllocated && Self.isConnectionBind(message) {
                loop.flush()
                if pipe != nil { return pipeToPeer(UnsafeRawBufferPointer(rebasing: bytes[consumed...])) }
            }
            if loop.core.outbox.needsFlush { loop.flush() }
        }
        loop.flush()
        if state == .open { keepPartial(UnsafeRawBufferPointer(rebasing: bytes[consumed...])) }
    }

    /// Moves the kept part frame to the start of `buffer`; returns its length.
    func restorePartial(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard partialCount > 0, let source = partial.baseAddress else { return 0 }
        let count = partialCount
        buffer.baseAddress!.copyMemory(from: source, byteCount: count)
        partialCount = 0
        return count
    }

    /// Keeps `bytes` (less than a frame) until the next read; the storage grows as needed and
    /// stays with the connection.
    func keepPartial(_ bytes: UnsafeRawBufferPointer) {
        partialCount = bytes.count
        guard bytes.count > 0 else { return }
        if partial.count < bytes.count {
            let capacity = min(StreamConnection.maxFrameLength, max(256, bytes.count, partial.count * 2))
            partial.deallocate()
            partial = .allocate(byteCount: capacity, alignment: 8)
        }
        partial.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
    }
}

extension StreamConnection {
    /// Whether a STUN frame is a ConnectionBind request (RFC 6062 §6.1: method 0x00B, class request).
    static func isConnectionBind(_ message: UnsafeRawBufferPointer) -> Bool {
        message.count >= 2 && message[0] == 0x00 && message[1] == 0x0B
    }
}
