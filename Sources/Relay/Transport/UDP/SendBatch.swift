import CLibevent
import Glibc
import StunCodec

/// Sends the outbox's UDP packets with one sendmmsg per run of packets leaving the same socket.
final class SendBatch {
    let capacity: Int
    let headers: UnsafeMutablePointer<relayd_mmsghdr>
    let vectors: UnsafeMutablePointer<iovec>
    let addresses: UnsafeMutablePointer<sockaddr_storage>
    /// Packets the kernel refused (EAGAIN with a full socket buffer, or an error).
    var failed: UInt64 = 0

    init(capacity: Int) {
        self.capacity = capacity
        headers = .allocate(capacity: capacity)
        vectors = .allocate(capacity: capacity)
        addresses = .allocate(capacity: capacity)
    }

    deinit {
        headers.deallocate()
        vectors.deallocate()
        addresses.deallocate()
    }

    /// Stages packet `i` of the current run.
    @inline(__always)
    func stage(_ i: Int, bytes: UnsafeRawBufferPointer, to address: TransportAddress) {
        let length = SocketAddress.write(address, into: UnsafeMutableRawPointer(addresses + i))
        vectors[i] = iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)
        headers[i] = relayd_mmsghdr()
        headers[i].msg_hdr.msg_name = UnsafeMutableRawPointer(addresses + i)
        headers[i].msg_hdr.msg_namelen = length
        headers[i].msg_hdr.msg_iov = vectors + i
        headers[i].msg_hdr.msg_iovlen = 1
    }

    /// Sends one datagram unfragmented, DF set (`OutboundPacket.dontFragment`); a refusal (over
    /// the path MTU: EMSGSIZE, which the socket's error queue also reports, docs/icmp.md) is
    /// counted in `failed`. Tried twice, like `send`, for the socket's pending error.
    func sendDontFragment(_ bytes: UnsafeRawBufferPointer, to destination: TransportAddress, from fd: Int32) {
        var storage = sockaddr_storage()
        let ok = withUnsafeMutableBytes(of: &storage) { raw -> Bool in
            let length = SocketAddress.write(destination, into: raw.baseAddress!)
            let to = raw.baseAddress!.assumingMemoryBound(to: sockaddr.self)
            return relayd_send_dont_fragment(fd, bytes.baseAddress, bytes.count, to, length) >= 0
                || relayd_send_dont_fragment(fd, bytes.baseAddress, bytes.count, to, length) >= 0
        }
        if !ok { failed += 1 }
    }

    /// Sends the first `count` staged packets from `fd`.
    func send(count: Int, from fd: Int32) {
        var sent = 0
        var retried = -1
        while sent < count {
            let n = relayd_sendmmsg(fd, headers + sent, UInt32(count - sent), 0)
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                // EAGAIN: the socket buffer is full; datagrams are droppable. Other errors: the
                // first try of a datagram may fail on the socket's pending asynchronous error (an
                // ICMP error queued since the last read, docs/icmp.md), which that failure clears
                // without sending; it is tried once more. A second failure skips it.
                if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK {
                    if retried != sent {
                        retried = sent
                        continue
                    }
                    failed += 1
                    sent += 1
                    continue
                }
                failed += UInt64(count - sent)
                return
            }
            sent += Int(n)
        }
    }
}
