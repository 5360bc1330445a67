/// Which loop thread of the node (0 ..< `relay-threads`): where a forwarded request, a pending
/// Allocate's answer or a pipe to close is posted. A handle of its own type so it is never
/// mistaken for a descriptor or a count.
public struct LoopIndex: Sendable, Hashable, CustomStringConvertible {
    public let value: Int

    public init(_ value: Int) { self.value = value }

    public var description: String { String(value) }
}
