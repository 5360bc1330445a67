import CLibevent
import Glibc
import StunCodec

/// Sends the data phase's packets at a fixed total rate, round-robin over the clients, from
/// one thread. Every client owns a ring of prebuilt frames; a packet is a header stamp into
/// the next frame, and each client's due frames leave with one sendmmsg per loop iteration.
final class PacedSender: @unchecked Sendable {
    static let slotsPerClient = 16
    let fds: [Int32]
    /// TLS connections (then frames are padded to 4 and written one TLS record each).
    private let streams: [ClientStream?]
    let rate: Double
    let frameLength: Int
    let payloadOffset: Int
    let slotSize: Int
    private let memory: UnsafeMutableRawBufferPointer
    private let headers: UnsafeMutablePointer<relayd_mmsghdr>
    private let vectors: UnsafeMutablePointer<iovec>
    private let pending: UnsafeMutablePointer<Int>
    private let sequences: UnsafeMutablePointer<UInt64>
    private let dirty: UnsafeMutablePointer<Int>
    private var dirtyCount = 0
    /// Window of measurement: packets stamped in [measureStart, measureEnd) count as sent.
    var measureStart: UInt64 = 0
    var measureEnd: UInt64 = 0
    private(set) var sentInWindow: UInt64 = 0
    private(set) var sentTotal: UInt64 = 0
    /// Packets the kernel refused to take (never sent, not counted as sent).
    private(set) var refused: UInt64 = 0
    /// The sending thread's CPU seconds when it finished.
    private(set) var cpuSeconds = 0.0
    /// From a packet's time stamp until the sender has handed it, and the rest of its client's
    /// batch, to the kernel (packets of the window only): the part of the latency the sender
    /// itself adds. A burst written back to back makes its first packets wait for the others.
    let sendDelay = LatencyHistogram()

    init(clients: [TurnClient], framing: DataFraming, payloadSize: Int, rate: Double) throws {
        fds = clients.map(\.fd)
        streams = clients.map(\.stream)
        self.rate = rate
        let n = clients.count
        slotSize = (payloadSize + 64 + 63) & ~63
        memory = .allocate(byteCount: slotSize * n * Self.slotsPerClient, alignment: 64)
        memory.initializeMemory(as: UInt8.self, repeating: 0)
        let padded = clients.first?.stream != nil
        headers = .allocate(capacity: n * Self.slotsPerClient)
        vectors = .allocate(capacity: n * Self.slotsPerClient)
        pending = .allocate(capacity: n)
        pending.initialize(repeating: 0, count: n)
        sequences = .allocate(capacity: n)
        sequences.initialize(repeating: 0, count: n)
        dirty = .allocate(capacity: n + 4097)
        var length = 0
        var offset = 0
        for (c, client) in clients.enumerated() {
            for s in 0..<Self.slotsPerClient {
                let k = c * Self.slotsPerClient + s
                let slot = UnsafeMutableRawBufferPointer(rebasing: memory[k * slotSize..<(k + 1) * slotSize])
                (length, offset) = try DataFraming.build(framing, client: client, payloadSize: payloadSize, into: slot)
                if padded { length = (length + 3) & ~3 }  // RFC 8656 §12.5: ChannelData padded over streams
                vectors[k] = iovec(iov_base: slot.baseAddress, iov_len: length)
                headers[k] = relayd_mmsghdr()
                headers[k].msg_hdr.msg_iov = vectors + k
                headers[k].msg_hdr.msg_iovlen = 1
            }
        }
        frameLength = length
        payloadOffset = offset
    }

    deinit {
        memory.deallocate()
        headers.deallocate()
        vectors.deallocate()
        pending.deallocate()
        sequences.deallocate()
        dirty.deallocate()
    }

    /// Sends from `start` until `measureEnd` at `rate` packets per second in total.
    func run(start: UInt64) {
        guard !fds.isEmpty else { return }
        Clock.sleep(until: start)
        while true {
            let now = Clock.now()
            if now >= measureEnd { break }
            let next = sendDue(start: start, now: now)
            // Wake at most every 100 µs: fewer sleeps per packet, bursts far below any queue size.
            Clock.sleep(until: max(next, Clock.now() &+ 100_000))
        }
        cpuSeconds = ThreadCPU.seconds()
    }

    private var issued: UInt64 = 0
    private var nextClient = 0

    /// Sends every packet due by `now` (round-robin over the clients) and returns when the
    /// next one is due.
    func sendDue(start: UInt64, now: UInt64) -> UInt64 {
        let n = fds.count
        let interval = 1e9 / rate
        let due = now > start ? UInt64(Double(now - start) / interval) + 1 : 0
        var burst = due > issued ? due - issued : 0
        if burst > 4096 { burst = 4096 }
        while burst > 0 {
            enqueue(nextClient)
            if pending[nextClient] == Self.slotsPerClient { flush(nextClient) }
            nextClient += 1
            if nextClient == n { nextClient = 0 }
            issued += 1
            burst -= 1
        }
        for d in 0..<dirtyCount where pending[dirty[d]] > 0 { flush(dirty[d]) }
        dirtyCount = 0
        return start &+ UInt64(Double(issued) * interval)
    }

    /// Records the calling thread's CPU time as the sender's (single-threaded TLS runs).
    func finishOnThisThread() { cpuSeconds = ThreadCPU.seconds() }

    /// Stamps the next frame of `client` with its flow, sequence and the current time.
    @inline(__always)
    private func enqueue(_ c: Int) {
        let k = c * Self.slotsPerClient + pending[c]
        let payload = memory.baseAddress! + k * slotSize + payloadOffset
        PayloadFormat.stamp(payload, flow: UInt32(c), sequence: sequences[c], time: Clock.now())
        sequences[c] &+= 1
        if pending[c] == 0 {
            dirty[dirtyCount] = c
            dirtyCount += 1
        }
        pending[c] += 1
    }

    /// Sends the pending frames of `client` with one sendmmsg.
    private func flush(_ c: Int) {
        let count = pending[c]
        pending[c] = 0
        let first = c * Self.slotsPerClient
        var done = 0
        if let stream = streams[c] {
            while done < count {
                let v = vectors[first + done]
                guard stream.write(UnsafeRawBufferPointer(start: v.iov_base, count: v.iov_len)) else {
                    refused &+= UInt64(count - done)
                    break
                }
                done += 1
            }
        }
        while streams[c] == nil && done < count {
            let r = relayd_sendmmsg(fds[c], headers + first + done, UInt32(count - done), 0)
            if r < 0 {
                if errno == EINTR { continue }
                refused &+= UInt64(count - done)
                break
            }
            done += Int(r)
        }
        let written = Clock.now()
        for s in 0..<done {
            let time = (memory.baseAddress! + (first + s) * slotSize + payloadOffset)
                .loadUnaligned(fromByteOffset: 16, as: UInt64.self)
            if time >= measureStart {
                sentInWindow &+= 1
                sendDelay.record(written &- time)
            }
        }
        sentTotal &+= UInt64(done)
    }
}
