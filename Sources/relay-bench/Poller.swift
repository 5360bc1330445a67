import Glibc

/// A poll(2) set whose ready entries carry a caller-chosen token (a client index). Swift's
/// Glibc module does not expose epoll, and the sets here are small (the clients of one run,
/// or the transactions in flight), so poll is enough.
final class Poller {
    private var fds: [pollfd] = []
    private var tokens: [Int] = []
    /// Tokens of the entries found ready by the last `wait`.
    private(set) var ready: [Int] = []

    init(capacity: Int = 256) {
        fds.reserveCapacity(capacity)
        tokens.reserveCapacity(capacity)
        ready.reserveCapacity(capacity)
    }

    /// Watches `socket` for readability, reporting `token`.
    func add(_ socket: Int32, token: Int) {
        fds.append(pollfd(fd: socket, events: Int16(POLLIN), revents: 0))
        tokens.append(token)
    }

    /// Forgets every socket.
    func removeAll() {
        fds.removeAll(keepingCapacity: true)
        tokens.removeAll(keepingCapacity: true)
    }

    /// Waits up to `timeoutMs`; returns how many tokens are in `ready`.
    func wait(timeoutMs: Int32) -> Int {
        ready.removeAll(keepingCapacity: true)
        let n = fds.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), timeoutMs) }
        guard n > 0 else { return 0 }
        for i in fds.indices where fds[i].revents != 0 {
            ready.append(tokens[i])
            if ready.count == Int(n) { break }
        }
        return ready.count
    }
}
