/// The 14-bit STUN message type: method and class bits interleaved (RFC 8489 §5, Figure 3).
///
/// ```
///  0                 1
///  2  3  4 5 6 7 8 9 0 1 2 3 4 5
/// +--+--+-+-+-+-+-+-+-+-+-+-+-+-+
/// |M |M |M|M|M|C|M|M|M|C|M|M|M|M|
/// |11|10|9|8|7|1|6|5|4|0|3|2|1|0|
/// +--+--+-+-+-+-+-+-+-+-+-+-+-+-+
/// ```
public struct MessageType: Hashable, Sendable {
    public var method: Method
    public var messageClass: MessageClass

    @inlinable
    public init(method: Method, messageClass: MessageClass) {
        self.method = method
        self.messageClass = messageClass
    }

    /// Unpacks a 16-bit wire value; the top two bits must already be known to be zero.
    @inlinable
    public init(rawValue: UInt16) {
        let m = rawValue
        let method = (m & 0x000F) | ((m & 0x00E0) >> 1) | ((m & 0x3E00) >> 2)
        let c = ((m & 0x0010) >> 4) | ((m & 0x0100) >> 7)
        self.method = Method(rawValue: method)
        self.messageClass = MessageClass(rawValue: UInt8(c))!
    }

    /// The packed 14-bit value.
    @inlinable
    public var rawValue: UInt16 {
        let m = method.rawValue
        let c = UInt16(messageClass.rawValue)
        return (m & 0x000F) | ((m & 0x0070) << 1) | ((m & 0x0F80) << 2) | ((c & 0b01) << 4) | ((c & 0b10) << 7)
    }

    public static let bindingRequest = MessageType(method: .binding, messageClass: .request)
    public static let bindingSuccess = MessageType(method: .binding, messageClass: .successResponse)
}
