import StunCodec

/// How a client's data travels to the server: ChannelData on its bound channel, or a Send
/// indication to its peer (RFC 8656 §12.4, §11.1); or, without a relay, as it is. Frames are built once per send slot; only
/// the payload header changes per packet.
enum DataFraming {
    case channelData
    case sendIndication
    /// The payload alone, for the baseline without a relay (`--direct`).
    case raw

    /// Writes a frame for `client` carrying `payloadSize` bytes (pattern filled) into `slot`;
    /// returns (frame length, offset of the payload).
    static func build(
        _ framing: DataFraming, client: TurnClient, payloadSize: Int, into slot: UnsafeMutableRawBufferPointer
    ) throws -> (length: Int, payloadOffset: Int) {
        switch framing {
        case .channelData:
            ChannelDataMessage.writeHeader(into: slot, channelNumber: client.channel, length: payloadSize)
            PayloadFormat.fillPattern(UnsafeMutableRawBufferPointer(rebasing: slot[4..<4 + payloadSize]))
            return (4 + payloadSize, 4)
        case .raw:
            PayloadFormat.fillPattern(UnsafeMutableRawBufferPointer(rebasing: slot[0..<payloadSize]))
            return (payloadSize, 0)
        case .sendIndication:
            var w = try StunMessageWriter(
                into: slot, type: MessageType(method: .send, messageClass: .indication), transactionID: .random())
            try w.append(XORPeerAddress(address: client.peer!))
            try w.appendAttribute(.data, length: payloadSize) { value in
                PayloadFormat.fillPattern(value)
            }
            let padded = (payloadSize + 3) & ~3
            return (w.count, w.count - padded)
        }
    }

    /// The application data inside a received frame (ChannelData or Data indication); nil when
    /// it is neither.
    @inline(__always)
    static func payload(of frame: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard frame.count >= 4 else { return nil }
        if frame[0] & 0xC0 == 0x40 {
            return (try? ChannelDataMessage(parsing: frame))?.data
        }
        guard let message = try? StunMessage(parsing: frame),
            message.type == MessageType(method: .data, messageClass: .indication)
        else { return nil }
        return message.attribute(.data)?.value
    }
}
