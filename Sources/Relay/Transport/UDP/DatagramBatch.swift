import CLibevent
import Glibc

/// Preallocated buffers and headers for receiving a batch of datagrams with one recvmmsg
/// (and headroom in front of each payload for in-place TURN headers). Allocated once per thread.
final class DatagramBatch {
    let count: Int
    let slotSize: Int
    let headroom: Int
    let memory: UnsafeMutableRawBufferPointer
    let headers: UnsafeMutablePointer<relayd_mmsghdr>
    let vectors: UnsafeMutablePointer<iovec>
    let addresses: UnsafeMutablePointer<sockaddr_storage>

    init(count: Int = 32, payloadBytes: Int = 65_536 - 8, headroom: Int, tailroom: Int) {
        self.count = count
        self.headroom = headroom
        slotSize = (headroom + payloadBytes + tailroom + 63) & ~63
        memory = UnsafeMutableRawBufferPointer.allocate(byteCount: slotSize * count, alignment: 64)
        headers = .allocate(capacity: count)
        vectors = .allocate(capacity: count)
        addresses = .allocate(capacity: count)
        for i in 0..<count {
            vectors[i] = iovec(iov_base: memory.baseAddress! + i * slotSize + headroom, iov_len: payloadBytes)
        }
    }

    deinit {
        memory.deallocate()
        headers.deallocate()
        vectors.deallocate()
        addresses.deallocate()
    }

    /// Relay-socket reads flush first when fewer slots than this are free.
    static let minimumFreeSlots = 4

    /// Receives up to `count` datagrams; returns how many (0 on EAGAIN or error).
    func receive(from fd: Int32) -> Int { receive(from: fd, slots: 0..<count) }

    /// Receives up to `slots.count` datagrams into those slots; returns how many.
    func receive(from fd: Int32, slots: Range<Int>) -> Int {
        guard !slots.isEmpty else { return 0 }
        for i in slots {
            headers[i] = relayd_mmsghdr()
            headers[i].msg_hdr.msg_name = UnsafeMutableRawPointer(addresses + i)
            headers[i].msg_hdr.msg_namelen = socklen_t(MemoryLayout<sockaddr_storage>.size)
            headers[i].msg_hdr.msg_iov = vectors + i
            headers[i].msg_hdr.msg_iovlen = 1
        }
        let n = relayd_recvmmsg(fd, headers + slots.lowerBound, UInt32(slots.count), 0, nil)
        return n > 0 ? Int(n) : 0
    }

    /// The whole slot `i` (headroom + payload area + tailroom).
    func slot(_ i: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(rebasing: memory[i * slotSize..<(i + 1) * slotSize])
    }

    /// Length of datagram `i`, or nil if the kernel truncated it.
    func length(_ i: Int) -> Int? {
        if headers[i].msg_hdr.msg_flags & Int32(MSG_TRUNC) != 0 { return nil }
        return Int(headers[i].msg_len)
    }

    func source(_ i: Int) -> UnsafeRawPointer { UnsafeRawPointer(addresses + i) }
}
