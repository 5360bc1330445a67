import Foundation
import Glibc
import RelayCore
import StunCodec

/// Resolves a host name on a thread of its own, so a slow DNS server never stalls the main loop
/// (hiredis 0.14 resolves inside `redisAsyncConnect`, synchronously); or asks Redis's sentinels
/// where the master is, which blocks as long. The loop polls `take()`.
public final class HostResolver: Sendable {
    public enum Outcome: Sendable, Equatable {
        case address(String)
        /// The master the sentinels named (`named`, as they wrote it) at `address`.
        case master(address: String, port: Int, named: RedisSentinel.Address)
        case failure(String)
    }

    private struct State {
        var running = false
        var outcome: Outcome? = nil
        /// The resolution under way is no longer wanted: its outcome is dropped.
        var discard = false
    }

    private let state = Locked(State())

    /// Starts resolving `host` unless a resolution is under way.
    func start(_ host: String) {
        start { Self.resolve(host) }
    }

    /// Starts asking `sentinel` for its master (with `credentials` when it has none of its own),
    /// and resolving the host it names, unless a resolution is under way.
    func start(_ sentinel: RedisSentinel, credentials: RedisEndpoint) {
        start {
            let master: RedisSentinel.Address
            do throws(RedisBlockingClient.Failure) {
                master = try sentinel.master(credentials: credentials, timeout: timeval(tv_sec: 0, tv_usec: 500_000))
            } catch {
                return .failure(error.description)
            }
            if IPAddress(master.host) != nil { return .master(address: master.host, port: master.port, named: master) }
            switch Self.resolve(master.host) {
            case .address(let address): return .master(address: address, port: master.port, named: master)
            case let other: return other
            }
        }
    }

    private func start(_ work: @escaping @Sendable () -> Outcome) {
        let begin = state.withLock { s -> Bool in
            guard !s.running else { return false }
            s.running = true
            s.outcome = nil
            return true
        }
        guard begin else { return }
        let thread = Thread { [self] in
            let outcome = work()
            state.withLock { s in
                s.running = false
                if s.discard { s.discard = false } else { s.outcome = outcome }
            }
        }
        thread.name = "relayd-resolver"
        thread.start()
    }

    /// Forgets the finished resolution, and the one under way when it finishes.
    func cancel() {
        state.withLock { s in
            s.outcome = nil
            if s.running { s.discard = true }
        }
    }

    /// The finished resolution, once.
    func take() -> Outcome? {
        state.withLock { s in
            defer { s.outcome = nil }
            return s.outcome
        }
    }

    /// The first address of `host` (IPv4 or IPv6), as text.
    public static func resolve(_ host: String) -> Outcome {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>? = nil
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0, let first = list else {
            return .failure("cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard getnameinfo(first.pointee.ai_addr, first.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0
        else { return .failure("cannot resolve \(host)") }
        return .address(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
}
