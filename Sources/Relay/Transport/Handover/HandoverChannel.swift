import CHandover
import Glibc

/// One end of the live upgrade's socket pair (SOCK_SEQPACKET, so each message arrives whole):
/// messages with their descriptors (SCM_RIGHTS), a deadline on every wait (docs/live-upgrade.md).
final class HandoverChannel: Sendable {
    let fd: Int32
    /// The kernel's limit of descriptors in one message (SCM_MAX_FD).
    static let maxDescriptors = Int(RELAYD_HANDOVER_MAX_FDS)
    /// The descriptor the heir finds its end on (`relayd_handover_spawn`).
    static let heirDescriptor: Int32 = 3
    /// The environment variable that tells a relayd it is an heir.
    static let environmentKey = "RELAYD_HANDOVER_FD"
    /// The environment variable in which the running relayd names its protocol version
    /// (`HandoverMessage.helloVersion`).
    static let versionKey = "RELAYD_HANDOVER_VERSION"

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }

    /// A connected pair: the running relayd's end and the heir's (close-on-exec both; the spawn
    /// moves the heir's to descriptor 3).
    static func pair() throws(Failure) -> (HandoverChannel, Int32) {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw Failure(description: "socketpair: \(String(cString: strerror(errno)))")
        }
        return (HandoverChannel(fd: fds[0]), fds[1])
    }

    /// The encoded bytes are wiped once sent: messages carry keys and TLS traffic secrets.
    func send(_ message: HandoverMessage, descriptors: [Int32] = []) throws(Failure) {
        var bytes = message.encoded()
        defer { bytes.withUnsafeMutableBytes { SecretBytes.wipe($0) } }
        let sent = bytes.withUnsafeBytes { raw in
            descriptors.withUnsafeBufferPointer {
                relayd_handover_send(fd, raw.baseAddress, raw.count, $0.baseAddress, Int32($0.count))
            }
        }
        guard sent == bytes.count else {
            throw Failure(description: "send: \(sent < 0 ? String(cString: strerror(errno)) : "cut short")")
        }
    }

    /// The next message and its descriptors, waiting until `deadline` (CLOCK_MONOTONIC ms). The
    /// caller owns the descriptors; a message that cannot be read closes those it brought.
    func receive(until deadline: Int64) throws(Failure) -> (HandoverMessage, [Int32]) {
        while true {
            let left = deadline - HandoverChannel.monotonicMillis()
            guard left > 0 else { throw Failure(description: "timed out") }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(left, 1000)))
            if ready < 0 && errno == EINTR { continue }
            guard ready >= 0 else { throw Failure(description: "poll: \(String(cString: strerror(errno)))") }
            if ready == 0 { continue }
            break
        }
        var buffer = [UInt8](repeating: 0, count: HandoverMessage.maxBytes)
        var descriptors = [Int32](repeating: -1, count: HandoverChannel.maxDescriptors)
        var count: Int32 = 0
        // Wiped once decoded, as what was sent is (`send`).
        defer { buffer.withUnsafeMutableBytes { SecretBytes.wipe($0) } }
        let got = relayd_handover_recv(fd, &buffer, buffer.count, &descriptors, Int32(descriptors.count), &count)
        guard got > 0 else {
            throw Failure(description: got == 0 ? "the other side closed" : "receive: \(String(cString: strerror(errno)))")
        }
        let received = Array(descriptors[0..<Int(count)])
        let decoded = buffer.withUnsafeBytes { raw in
            Result { () throws(HandoverMessage.DecodingError) in
                try HandoverMessage(decoding: UnsafeRawBufferPointer(rebasing: raw[0..<got]))
            }
        }
        switch decoded {
        case .success(let message):
            return (message, received)
        case .failure(let error):
            for fd in received { close(fd) }
            throw Failure(description: "bad message: \(error.description)")
        }
    }

    static func monotonicMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
