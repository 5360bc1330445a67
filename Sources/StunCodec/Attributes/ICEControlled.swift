/// ICE-CONTROLLED: the sender thinks it is the controlled agent; the 64-bit tie-breaker
/// settles role conflicts (RFC 8445 §7.1.3, §16.1). Exactly 8 bytes, else `.badAttributeLength`.
public struct ICEControlled: TieBreakerAttribute, Hashable {
    public var tieBreaker: UInt64

    @inlinable
    public init(tieBreaker: UInt64) { self.tieBreaker = tieBreaker }

    @inlinable
    public static var attributeType: AttributeType { .iceControlled }
}
