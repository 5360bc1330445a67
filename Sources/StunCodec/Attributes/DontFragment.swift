/// DONT-FRAGMENT: asks the server to set the DF bit on packets it relays to peers
/// (RFC 8656 §18.9). Empty; any value bytes are `.badAttributeLength`.
public struct DontFragment: EmptyAttribute, Hashable {
    @inlinable
    public init() {}

    @inlinable
    public static var attributeType: AttributeType { .dontFragment }
}
