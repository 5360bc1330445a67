import Foundation
import Glibc
import RelayCore

/// Resolves a host name on a thread of its own, so a slow DNS server never stalls the main loop
/// (hiredis 0.14 resolves inside `redisAsyncConnect`, synchronously). The loop polls `take()`.
public final class HostResolver: Sendable {
    public enum Outcome: Sendable, Equatable {
        case address(String)
        case failure(String)
    }

    private struct State {
        var running = false
        var outcome: Outcome? = nil
    }

    private let state = Locked(State())

    /// Starts resolving `host` unless a resolution is under way.
    func start(_ host: String) {
        let begin = state.withLock { s -> Bool in
            guard !s.running else { return false }
            s.running = true
            s.outcome = nil
            return true
        }
        guard begin else { return }
        let thread = Thread { [self] in
            let outcome = Self.resolve(host)
            state.withLock { s in
                s.running = false
                s.outcome = outcome
            }
        }
        thread.name = "relayd-resolver"
        thread.start()
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
