import CLibevent

extension EventLoop {
    /// Listens for packets other loops hand to this loop's TCP/TLS clients (`HandOffInbox`),
    /// when the server runs several loops.
    func attachInbox() {
        let context = core.context
        guard context.threadIndex < context.directory.inboxes.count else { return }
        let inbox = context.directory.inboxes[context.threadIndex]
        guard let event = event_new(base, -1, 0, { _, _, arg in
            Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().drainHandOffs()
        }, opaqueSelf) else { return }
        self.inbox = inbox
        inboxEvent = event
        let address = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(event)))
        inbox.attach { event_active(OpaquePointer(bitPattern: address), 0, 0) }
        drainHandOffs()
    }

    /// Stops the wake-ups (before the event is freed); packets posted later stay unread.
    func detachInbox() {
        inbox?.detach()
        if let inboxEvent { event_free(inboxEvent) }
        inboxEvent = nil
        inbox = nil
    }

    /// Delivers every handed-off packet as if it had arrived on its target's relay socket, then
    /// writes them out before the arena is given back (stream writes copy the bytes).
    func drainHandOffs() {
        guard let inbox, let batch = inbox.take() else { return }
        let now = EventLoop.now()
        for record in batch.records {
            core.handleHandOff(
                to: record.target, from: record.source, buffer: batch.arena, payload: record.payload, now: now)
            if core.outbox.needsFlush { flush() }
        }
        flush()
        inbox.recycle(batch)
    }
}
