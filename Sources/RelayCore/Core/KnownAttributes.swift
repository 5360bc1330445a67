import StunCodec

/// The attribute types this server understands, for the 420 check (RFC 8489 §6.3.1).
enum KnownAttributes {
    static let types: Set<UInt16> = Set(
        [
            AttributeType.mappedAddress, .username, .messageIntegrity, .errorCode, .unknownAttributes, .realm, .nonce,
            .messageIntegritySHA256, .passwordAlgorithm, .userhash, .xorMappedAddress, .channelNumber, .lifetime,
            .xorPeerAddress, .data, .xorRelayedAddress, .requestedAddressFamily, .evenPort, .requestedTransport,
            .dontFragment, .reservationToken, .connectionID, .changeRequest, .padding, .responsePort, .priority,
            .useCandidate,
        ].map(\.rawValue))

    static func contains(_ type: AttributeType) -> Bool { types.contains(type.rawValue) }
}
