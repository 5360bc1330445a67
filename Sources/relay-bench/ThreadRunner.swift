import Glibc

/// Starts plain pthreads for the sender, receiver and echo peer loops and joins them.
enum ThreadRunner {
    private final class Box {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Runs `body` on a new thread.
    static func spawn(_ body: @escaping @Sendable () -> Void) -> pthread_t {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body()
                return nil
            }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        return thread
    }

    /// Waits for `thread` to finish.
    static func join(_ thread: pthread_t) { pthread_join(thread, nil) }
}
