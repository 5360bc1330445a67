import Synchronization

/// A value behind a `Mutex`, for the state loop threads share (docs/architecture.md, "What is
/// shared between loops").
///
/// ThreadSanitizer does not see the standard library's `Mutex` on Linux: its lock and unlock run
/// in code TSan did not instrument (the futex), so every critical section looks unordered and is
/// reported as a race. `Locked` adds what TSan does see: each critical section starts with an
/// acquiring load of one atomic counter and ends with a releasing increment of it. The mutex
/// already orders the sections; the counter makes that order visible, so the sanitizer reports
/// only accesses that really are unsynchronized. It costs one uncontended atomic load and one
/// atomic add on the cache line the lock itself takes.
public struct Locked<Value: Sendable>: ~Copyable, Sendable {
    private let mutex: Mutex<Value>
    private let order = Atomic<UInt>(0)

    public init(_ value: Value) { mutex = Mutex(value) }

    /// Runs `body` with exclusive access to the value.
    @inline(__always)
    public borrowing func withLock<Result: Sendable, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E)
        -> Result
    {
        try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            _ = order.load(ordering: .acquiring)
            defer { order.wrappingAdd(1, ordering: .releasing) }
            return try body(&value)
        }
    }
}
