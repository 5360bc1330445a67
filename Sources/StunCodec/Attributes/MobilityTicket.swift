/// MOBILITY-TICKET: empty in an Allocate that asks for mobility; otherwise the opaque ticket the
/// server issued, which the client presents in a Refresh from a new 5-tuple (RFC 8016 §3.3). Any
/// length; what a ticket holds is the server's business (docs/mobility.md for relayd's).
public struct MobilityTicket: StunAttributeValue, Hashable {
    public var bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public static var attributeType: AttributeType { .mobilityTicket }

    public init(decoding value: UnsafeRawBufferPointer, transactionID: TransactionID) throws(StunDecodeError) {
        bytes = Array(value)
    }

    public var encodedLength: Int { bytes.count }

    public func encode(into value: UnsafeMutableRawBufferPointer, transactionID: TransactionID) {
        ValueCoding.copy(bytes, into: value)
    }
}
