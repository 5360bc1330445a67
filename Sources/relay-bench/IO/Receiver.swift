import CLibevent
import Glibc
import Synchronization

/// Drains every client socket with recvmmsg from one thread (libevent over epoll), checks
/// each payload and records loss, duplicates, reordering, corruption and latency. Buffers,
/// bitmaps and the histogram are allocated up front.
final class Receiver: @unchecked Sendable {
    static let batch = 32
    static let slotSize = 2048
    let fds: [Int32]
    /// TLS connections, when the run uses them.
    private let streams: [ClientStream?]
    /// For client i, the flow it must receive (its partner, or itself with an echo peer).
    let expectedFlow: [Int]
    let payloadSize: Int
    let tracker: FlowTracker
    let latency = LatencyHistogram()
    let stop = Atomic<Bool>(false)
    /// Client position by socket descriptor (libevent callbacks get the descriptor).
    private let clientByFD: [Int]
    private let memory: UnsafeMutableRawBufferPointer
    private let headers: UnsafeMutablePointer<relayd_mmsghdr>
    private let vectors: UnsafeMutablePointer<iovec>
    private let reference: UnsafeMutableRawBufferPointer
    /// Only packets sent at or after this time count.
    var measureStart: UInt64 = 0
    private(set) var corrupted: UInt64 = 0
    /// Distinct valid packets sent within the window.
    private(set) var received: UInt64 = 0
    /// Valid packets sent before the measurement window (warmup), ignored.
    private(set) var warmup: UInt64 = 0
    private(set) var datagrams: UInt64 = 0
    private(set) var syscalls: UInt64 = 0

    /// Frames are the payload alone (the baseline without a relay).
    let raw: Bool

    init(clients: [TurnClient], expectedFlow: [Int], payloadSize: Int, raw: Bool = false, maxSequence: Int) {
        self.raw = raw
        fds = clients.map(\.fd)
        streams = clients.map(\.stream)
        self.expectedFlow = expectedFlow
        self.payloadSize = payloadSize
        tracker = FlowTracker(flows: clients.count, maxSequence: maxSequence)
        var byFD = Array(repeating: -1, count: Int(fds.max() ?? 0) + 1)
        for (i, fd) in fds.enumerated() { byFD[Int(fd)] = i }
        clientByFD = byFD
        memory = .allocate(byteCount: Self.batch * Self.slotSize, alignment: 64)
        headers = .allocate(capacity: Self.batch)
        vectors = .allocate(capacity: Self.batch)
        reference = .allocate(byteCount: payloadSize, alignment: 16)
        PayloadFormat.fillPattern(reference)
        for i in 0..<Self.batch {
            vectors[i] = iovec(iov_base: memory.baseAddress! + i * Self.slotSize, iov_len: Self.slotSize)
        }
    }

    deinit {
        memory.deallocate()
        headers.deallocate()
        vectors.deallocate()
        reference.deallocate()
    }

    /// Runs until `stop` is set (checked every 20 ms).
    func run() {
        open()
        event_base_dispatch(base)
        close()
    }

    /// One pass of the loop for single-threaded (TLS) runs: handles what is ready, waiting at
    /// most until `deadline` (monotonic ns; the sender's next due packet), so the pacing of the
    /// sends does not depend on when the server's packets happen to wake the thread.
    func runOnce(until deadline: UInt64) {
        let now = Clock.now()
        guard deadline > now, let wake else {
            event_base_loop(base, EVLOOP_NONBLOCK)
            return
        }
        let wait = deadline - now
        var interval = timeval(tv_sec: Int(wait / 1_000_000_000), tv_usec: Int(wait % 1_000_000_000 / 1000))
        event_add(wake, &interval)
        event_base_loop(base, EVLOOP_ONCE)
    }

    /// Creates the event base: one persistent read event per client and the 20 ms stop timer.
    func open() {
        // A precise timer (timerfd under epoll): without it libevent rounds a wait up to whole
        // milliseconds, so a TLS run that asks to wake in 100 µs sleeps 1 ms and then sends a
        // millisecond's packets back to back, each stamped before the burst is written.
        let config = event_config_new()
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_PRECISE_TIMER.rawValue))
        let base = event_base_new_with_config(config) ?? event_base_new()!
        event_config_free(config)
        let me = Unmanaged.passUnretained(self).toOpaque()
        var events: [OpaquePointer] = []
        for fd in fds {
            let event = event_new(
                base, fd, Int16(EV_READ | EV_PERSIST),
                { fd, _, arg in
                    Unmanaged<Receiver>.fromOpaque(arg!).takeUnretainedValue().readable(fd)
                }, me)!
            event_add(event, nil)
            events.append(event)
        }
        let timer = event_new(
            base, -1, Int16(EV_PERSIST),
            { _, _, arg in
                let receiver = Unmanaged<Receiver>.fromOpaque(arg!).takeUnretainedValue()
                if receiver.stop.load(ordering: .relaxed) { event_base_loopbreak(receiver.base) }
            }, me)!
        self.base = base
        var interval = timeval(tv_sec: 0, tv_usec: 20_000)
        event_add(timer, &interval)
        self.events = events
        self.timer = timer
        wake = event_new(base, -1, 0, { _, _, _ in }, nil)
    }

    /// Frees the event base and records this thread's CPU time.
    func close() {
        for event in events { event_free(event) }
        if let timer { event_free(timer) }
        if let wake { event_free(wake) }
        if let base { event_base_free(base) }
        events = []
        timer = nil
        wake = nil
        base = nil
        cpuSeconds = ThreadCPU.seconds()
    }

    private var events: [OpaquePointer] = []
    private var timer: OpaquePointer?
    /// A one-shot timer that ends `runOnce(until:)`'s wait at the deadline.
    private var wake: OpaquePointer?

    /// The running loop's base (for the stop timer).
    private var base: OpaquePointer?
    /// This thread's CPU seconds when it finished.
    private(set) var cpuSeconds = 0.0

    /// Drains the socket `fd` (one client's) until it is empty.
    private func readable(_ fd: Int32) {
        let client = clientByFD[Int(fd)]
        if let stream = streams[client] {
            let now = Clock.now()
            stream.readFrames { frame in handle(frame, client: client, now: now) }
            return
        }
        while drain(client) == Self.batch {}
    }

    /// One recvmmsg on `client`'s socket; returns how many datagrams came.
    @inline(__always)
    private func drain(_ client: Int) -> Int {
        for i in 0..<Self.batch {
            headers[i] = relayd_mmsghdr()
            headers[i].msg_hdr.msg_iov = vectors + i
            headers[i].msg_hdr.msg_iovlen = 1
        }
        let n = relayd_recvmmsg(fds[client], headers, UInt32(Self.batch), 0, nil)
        syscalls &+= 1
        guard n > 0 else { return 0 }
        let now = Clock.now()
        let count = Int(n)
        datagrams &+= UInt64(count)
        for i in 0..<count {
            let frame = UnsafeRawBufferPointer(
                start: memory.baseAddress! + i * Self.slotSize, count: Int(headers[i].msg_len))
            if headers[i].msg_hdr.msg_flags & Int32(MSG_TRUNC) != 0 {
                corrupted &+= 1
                continue
            }
            handle(frame, client: client, now: now)
        }
        return count
    }

    /// Checks one received frame of `client` and records it.
    @inline(__always)
    private func handle(_ frame: UnsafeRawBufferPointer, client: Int, now: UInt64) {
        guard let payload = raw ? frame : DataFraming.payload(of: frame),
            let header = PayloadHeader(
                validating: payload, expectedSize: payloadSize, reference: UnsafeRawBufferPointer(reference)),
            Int(header.flow) == expectedFlow[client]
        else {
            corrupted &+= 1
            return
        }
        if header.time < measureStart {
            warmup &+= 1
            _ = tracker.record(flow: Int(header.flow), sequence: header.sequence)
            return
        }
        if tracker.record(flow: Int(header.flow), sequence: header.sequence) {
            received &+= 1
            latency.record(now &- header.time)
        }
    }
}
