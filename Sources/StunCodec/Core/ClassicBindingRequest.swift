/// An RFC 3489 ("classic STUN") Binding request: the 20-byte header with a 128-bit
/// transaction ID and no magic cookie (RFC 3489 §11.1), then attributes. RFC 8489 §12 lets a
/// server answer such clients; relayd does with `rfc3489-compatibility`. Only what the answer
/// needs is read: the transaction ID and CHANGE-REQUEST (RFC 3489 §11.2.4); RESPONSE-ADDRESS,
/// which would send the answer to a third party, is never honoured.
public struct ClassicBindingRequest: Sendable {
    /// The 16 bytes after the length field, echoed in the response.
    public let transactionID: [UInt8]
    public let changeRequest: ChangeRequest?
    /// Bytes of the whole request.
    public let length: Int

    public static let bindingRequest: UInt16 = 0x0001
    public static let bindingResponse: UInt16 = 0x0101

    /// Parses `bytes`; throws for anything but a well-formed Binding request with no magic cookie.
    public init(parsing bytes: UnsafeRawBufferPointer) throws(StunDecodeError) {
        guard bytes.count >= StunConstants.headerLength else { throw .truncated }
        guard bytes.loadUnaligned(fromByteOffset: 0, as: UInt16.self).bigEndian == Self.bindingRequest else {
            throw .notStun
        }
        let length = Int(bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self).bigEndian)
        guard length & 3 == 0, StunConstants.headerLength + length == bytes.count else { throw .badMessageLength }
        var change: ChangeRequest? = nil
        var offset = StunConstants.headerLength
        while offset < bytes.count {
            guard offset + 4 <= bytes.count else { throw .attributeOverrun }
            let type = AttributeType(rawValue: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self).bigEndian)
            let valueLength = Int(bytes.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self).bigEndian)
            let next = offset + 4 + ((valueLength + 3) & ~3)
            guard next <= bytes.count else { throw .attributeOverrun }
            if type == .changeRequest {
                let value = UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<(offset + 4 + valueLength)])
                change = try ChangeRequest(decoding: value, transactionID: TransactionID(high: 0, low: 0))
            }
            offset = next
        }
        transactionID = Array(bytes[4..<StunConstants.headerLength])
        changeRequest = change
        self.length = bytes.count
    }
}
