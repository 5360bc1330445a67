/// USE-CANDIDATE: the controlling agent nominates the candidate pair this check is sent on
/// (RFC 8445 §7.1.2, §16.1). Empty; any value bytes are `.badAttributeLength`.
public struct UseCandidate: EmptyAttribute, Hashable {
    @inlinable
    public init() {}

    @inlinable
    public static var attributeType: AttributeType { .useCandidate }
}
