import RelayCore
import Synchronization

/// A lock-protected value shared between the main thread and loop threads (start-up, shutdown
/// and metrics snapshots only; never the data path).
final class SharedState<Value: Sendable>: Sendable {
    private let mutex: Locked<Value>

    init(_ value: Value) { mutex = Locked(value) }

    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }

    var value: Value { mutex.withLock { $0 } }
}
