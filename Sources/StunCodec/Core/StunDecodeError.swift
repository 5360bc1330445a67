/// What was wrong with bytes that claimed to be STUN, TURN ChannelData or an attribute value.
///
/// Each case is a stable reason that the server counts drops by.
public enum StunDecodeError: Error, Hashable, Sendable {
    /// Fewer bytes than the fixed header (or than a fixed-size value) needs.
    case truncated
    /// One of the two most significant bits of the message is set (RFC 8489 §5).
    case notStun
    /// The magic cookie is not 0x2112A442 (RFC 8489 §5).
    case badMagicCookie
    /// The header's length is not a multiple of 4 or disagrees with the bytes received.
    case badMessageLength
    /// An attribute's length runs past the end of the message.
    case attributeOverrun
    /// An attribute's value has a length its type does not allow.
    case badAttributeLength(AttributeType)
    /// An attribute's value is malformed for its type (bad family, bad class, bad UTF-8 ...).
    case badAttributeValue(AttributeType)
    /// FINGERPRINT did not match the CRC-32 of the message (RFC 8489 §14.7).
    case badFingerprint
    /// An attribute followed FINGERPRINT, which must be last (RFC 8489 §14.7).
    case attributeAfterFingerprint
    /// A ChannelData channel number outside 0x4000–0x7FFF (RFC 8656 §12, RFC 5766 §11).
    case badChannelNumber
    /// A ChannelData length that disagrees with the bytes received (RFC 8656 §12.4).
    case badChannelDataLength
}

/// Why a message could not be written into the caller's buffer.
public enum StunEncodeError: Error, Hashable, Sendable {
    /// The buffer has no room for the next attribute.
    case bufferTooSmall
    /// An attribute value longer than 65,535 bytes, or a message over 65,535 + 20.
    case valueTooLong
    /// MESSAGE-INTEGRITY-SHA256 truncation outside 16–32 bytes or not a multiple of 4 (RFC 8489 §14.6).
    case badIntegrityLength
}
