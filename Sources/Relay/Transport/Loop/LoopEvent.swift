import CLibevent
import Glibc

/// A libevent timer, signal, readable descriptor or manually activated event that runs a closure on the thread of
/// its `event_base`.
/// Freed with the object (or by `cancel()`), so its owner decides its lifetime.
final class LoopEvent {
    private var event: OpaquePointer?
    private let action: () -> Void

    /// A timer firing every `interval` until cancelled.
    init(base: OpaquePointer, every interval: timeval, action: @escaping () -> Void) {
        self.action = action
        event = event_new(base, -1, Int16(EV_PERSIST), LoopEvent.fire, opaqueSelf)
        var interval = interval
        event_add(event, &interval)
    }

    /// A handler for `signal` (libevent turns it into a loop callback, so any code may run in it).
    init(base: OpaquePointer, signal: Int32, action: @escaping () -> Void) {
        self.action = action
        event = event_new(base, signal, Int16(EV_SIGNAL | EV_PERSIST), LoopEvent.fire, opaqueSelf)
        event_add(event, nil)
    }

    /// A handler run each time descriptor `fd` is readable, until cancelled.
    init(base: OpaquePointer, readable fd: Int32, action: @escaping () -> Void) {
        self.action = action
        event = event_new(base, fd, Int16(EV_READ | EV_PERSIST), LoopEvent.fire, opaqueSelf)
        event_add(event, nil)
    }

    /// An event that runs only when `activate()` is called (on the loop's thread): after the
    /// other events already active in this loop iteration.
    init(base: OpaquePointer, action: @escaping () -> Void) {
        self.action = action
        event = event_new(base, -1, 0, LoopEvent.fire, opaqueSelf)
    }

    func activate() {
        if let event { event_active(event, EV_TIMEOUT, 0) }
    }

    private var opaqueSelf: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    private static let fire: event_callback_fn = { _, _, arg in
        Unmanaged<LoopEvent>.fromOpaque(arg!).takeUnretainedValue().action()
    }

    func cancel() {
        if let event { event_free(event) }
        event = nil
    }

    deinit { cancel() }
}
