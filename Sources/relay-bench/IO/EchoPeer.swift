import CLibevent
import Glibc
import StunCodec
import Synchronization

/// A plain UDP echo server outside the relay (the `external-peer` pattern's far end): every
/// datagram goes back to where it came from, a recvmmsg batch answered with one sendmmsg.
final class EchoPeer: @unchecked Sendable {
    static let batch = 64
    static let slotSize = 2048
    let fd: Int32
    let address: TransportAddress
    let stop = Atomic<Bool>(false)
    private let memory: UnsafeMutableRawBufferPointer
    private let headers: UnsafeMutablePointer<relayd_mmsghdr>
    private let vectors: UnsafeMutablePointer<iovec>
    private let names: UnsafeMutablePointer<sockaddr_storage>
    /// Datagrams echoed so far (read by the measuring thread).
    let echoed = Atomic<UInt64>(0)
    /// The echo thread's CPU-time clock once it runs (Linux encodes such clocks as negative
    /// ids, so "not yet" is a value outside clockid_t).
    private let cpuClock = Atomic<Int64>(Int64.min)
    /// The echo thread's CPU seconds when it finished.
    private(set) var cpuSeconds = 0.0

    init?(ip: IPAddress) {
        guard let fd = UDPEndpoint.open(ip: ip, bufferBytes: 8 << 20), let address = UDPEndpoint.localAddress(fd)
        else { return nil }
        self.fd = fd
        self.address = address
        memory = .allocate(byteCount: Self.batch * Self.slotSize, alignment: 64)
        headers = .allocate(capacity: Self.batch)
        vectors = .allocate(capacity: Self.batch)
        names = .allocate(capacity: Self.batch)
    }

    deinit {
        close(fd)
        memory.deallocate()
        headers.deallocate()
        vectors.deallocate()
        names.deallocate()
    }

    /// The echo thread's CPU seconds so far, read from another thread; nil before it runs.
    /// What the echo costs per datagram (one receive, one send, on one socket, in batches, with
    /// no other work) is about what the kernel alone costs per relayed packet on that path.
    func cpuSecondsNow() -> Double? {
        let clock = cpuClock.load(ordering: .acquiring)
        guard clock != Int64.min else { return nil }
        return ThreadCPU.seconds(clock: clockid_t(clock))
    }

    /// Echoes until `stop` is set.
    func run() {
        var clock = clockid_t()
        if pthread_getcpuclockid(pthread_self(), &clock) == 0 { cpuClock.store(Int64(clock), ordering: .releasing) }
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while !stop.load(ordering: .relaxed) {
            if poll(&pfd, 1, 20) <= 0 { continue }
            while true {
                for i in 0..<Self.batch {
                    vectors[i] = iovec(iov_base: memory.baseAddress! + i * Self.slotSize, iov_len: Self.slotSize)
                    headers[i] = relayd_mmsghdr()
                    headers[i].msg_hdr.msg_name = UnsafeMutableRawPointer(names + i)
                    headers[i].msg_hdr.msg_namelen = socklen_t(MemoryLayout<sockaddr_storage>.size)
                    headers[i].msg_hdr.msg_iov = vectors + i
                    headers[i].msg_hdr.msg_iovlen = 1
                }
                let n = relayd_recvmmsg(fd, headers, UInt32(Self.batch), 0, nil)
                if n <= 0 { break }
                for i in 0..<Int(n) { vectors[i].iov_len = Int(headers[i].msg_len) }
                var done = 0
                while done < Int(n) {
                    let r = relayd_sendmmsg(fd, headers + done, UInt32(Int(n) - done), 0)
                    if r <= 0 { break }
                    done += Int(r)
                }
                echoed.add(UInt64(done), ordering: .relaxed)
                if n < Self.batch { break }
            }
        }
        cpuSeconds = ThreadCPU.seconds()
    }
}
