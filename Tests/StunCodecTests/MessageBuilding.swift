import StunCodec

/// The transaction ID of RFC 5769 §2.1–2.3, reused where any ID will do.
let testTransactionID = TransactionID(high: 0xB7E7_A701, low: 0xBC34_D686_FA87_DFAE)

/// Writes a message with the writer into a fresh buffer and returns exactly its bytes.
func buildMessage(
    _ type: MessageType = .bindingRequest, transactionID: TransactionID = testTransactionID, capacity: Int = 4096,
    _ body: (inout StunMessageWriter) throws -> Void
) throws -> [UInt8] {
    var buffer = [UInt8](repeating: 0xEE, count: capacity)
    let count = try buffer.withUnsafeMutableBytes { raw in
        var writer = try StunMessageWriter(into: raw, type: type, transactionID: transactionID)
        try body(&writer)
        return writer.count
    }
    return Array(buffer[0..<count])
}

/// Parses `bytes` (an exact-size copy, so over-reads would leave it) and hands the message to `body`.
func withMessage<T>(_ bytes: [UInt8], _ body: (StunMessage) throws -> T) throws -> T {
    try bytes.withUnsafeBytes { raw in try body(try StunMessage(parsing: raw)) }
}

/// The error `StunMessage(parsing:)` throws for `bytes`, or nil when it parses.
func parseError(_ bytes: [UInt8]) -> StunDecodeError? {
    bytes.withUnsafeBytes { raw -> StunDecodeError? in
        do throws(StunDecodeError) {
            _ = try StunMessage(parsing: raw)
            return nil
        } catch {
            return error
        }
    }
}

/// One attribute TLV: type, length (the value's, unless `declaredLength` says otherwise),
/// value, zero padding to 4.
func tlv(_ type: AttributeType, _ value: [UInt8], declaredLength: Int? = nil) -> [UInt8] {
    let length = declaredLength ?? value.count
    let padding = (4 - value.count % 4) % 4
    return be16(type.rawValue) + be16(UInt16(length)) + value + [UInt8](repeating: 0, count: padding)
}

/// A message assembled byte by byte: header (length computed from `body` unless given) + body.
func rawMessage(
    type: UInt16 = 0x0001, cookie: UInt32 = StunConstants.magicCookie, length: Int? = nil, _ body: [UInt8] = []
) -> [UInt8] {
    let id: [UInt8] = [0xB7, 0xE7, 0xA7, 0x01, 0xBC, 0x34, 0xD6, 0x86, 0xFA, 0x87, 0xDF, 0xAE]
    return be16(type) + be16(UInt16(length ?? body.count)) + be32(cookie) + id + body
}

func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
func be32(_ v: UInt32) -> [UInt8] {
    [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)]
}

/// A transport address from text; a typo in a test traps.
func address(_ text: String) -> TransportAddress { TransportAddress(text)! }
