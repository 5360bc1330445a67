/// A TCP/TLS client's connection as the other loop threads see it, for the relay-to-relay
/// short-circuit across loops: an opaque handle the core passes back in
/// `CoreCommand.deliverToStream`. The I/O layer of any thread may queue a packet already framed
/// for the client (ChannelData padded to 4 bytes, or a Data indication: RFC 8656 §11.3, §12.5, §12.7);
/// the connection serializes its queue and TLS session with its own lock, so no loop has to
/// wake the owning one for it.
public protocol StreamSink: AnyObject, Sendable {}

/// How a core finds the stream connections of its own loop, set by its loop's TCP/TLS transport
/// (nil without TCP/TLS listeners: stream allocations are then not listed in the directory and
/// take the relay socket path). A lookup only: packets reach connections through
/// `CoreCommand.deliverToStream`.
public struct StreamSinkHooks {
    /// The connection of a stream client on this loop, listed with its allocation in the directory.
    public var sink: ((ClientOrigin) -> (any StreamSink)?)?

    public init(sink: ((ClientOrigin) -> (any StreamSink)?)? = nil) {
        self.sink = sink
    }
}
