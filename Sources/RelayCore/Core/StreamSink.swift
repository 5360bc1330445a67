/// A TCP/TLS client's connection as the other loop threads see it, for the relay-to-relay
/// short-circuit across loops. Any thread may queue a packet already framed for the
/// client (ChannelData padded to 4 bytes, or a Data indication: RFC 8656 §11.3, §12.5, §12.7);
/// the connection serializes its queue and TLS session with its own lock, so no loop has to wake
/// the owning one for it.
public protocol StreamSink: AnyObject, Sendable {}

/// How a core reaches stream connections, set by its loop's TCP/TLS transport (nil without
/// TCP/TLS listeners: stream allocations are then not listed and take the relay socket path).
public struct StreamSinkHooks {
    /// The connection of a stream client on this loop, listed with its allocation in the directory.
    public var sink: ((ClientOrigin) -> (any StreamSink)?)?
    /// Queues a framed packet on a connection (of any loop) from this loop's thread, which
    /// writes it to the socket at the end of its iteration. False: the connection is closing or
    /// over its output bound, and the packet is dropped.
    public var write: ((any StreamSink, UnsafeRawBufferPointer) -> Bool)?

    public init(
        sink: ((ClientOrigin) -> (any StreamSink)?)? = nil,
        write: ((any StreamSink, UnsafeRawBufferPointer) -> Bool)? = nil
    ) {
        self.sink = sink
        self.write = write
    }
}
