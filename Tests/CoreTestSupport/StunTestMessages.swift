import StunCodec

/// Writes the attributes of a request body.
typealias StunBody = (inout StunMessageWriter) throws -> Void

/// What a request is signed with under the long-term credential mechanism (RFC 8489 §9.2.3):
/// USERNAME (or USERHASH), REALM, NONCE, PASSWORD-ALGORITHMS and PASSWORD-ALGORITHM when given,
/// then MESSAGE-INTEGRITY and/or MESSAGE-INTEGRITY-SHA256 with the long-term key.
struct LongTermSignature {
    enum Integrity { case sha1, sha256, both }

    var username: String
    var realm: String
    var nonce: String
    var key: [UInt8]
    var listed: [PasswordAlgorithm]? = nil
    var chosen: PasswordAlgorithm? = nil
    var integrity = Integrity.sha1
    /// USERHASH (SHA-256 of username ":" realm, RFC 8489 §14.4) instead of USERNAME.
    var userhash = false
}

/// Test-side encoders for STUN, TURN and ChannelData messages.
enum StunTestMessages {
    /// A message of `type`: `body`'s attributes, then USERNAME/REALM/NONCE/MESSAGE-INTEGRITY when
    /// `signature` is given, then FINGERPRINT when asked.
    static func build(
        _ type: MessageType, transactionID: TransactionID = .random(), signature: LongTermSignature? = nil,
        fingerprint: Bool = false, _ body: StunBody = { _ in }, afterIntegrity: StunBody = { _ in }
    ) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 2048)
        let count = try buffer.withUnsafeMutableBytes { raw in
            var w = try StunMessageWriter(into: raw, type: type, transactionID: transactionID)
            try body(&w)
            if let signature {
                if signature.userhash {
                    try w.append(
                        Userhash(
                            bytes: DigestAlgorithm.sha256.hash(
                                Array(signature.username.utf8) + [0x3A] + Array(signature.realm.utf8))))
                } else {
                    try w.append(Username(value: signature.username))
                }
                try w.append(Realm(value: signature.realm))
                try w.append(Nonce(value: signature.nonce))
                if let listed = signature.listed { try w.append(PasswordAlgorithms(algorithms: listed)) }
                if let chosen = signature.chosen { try w.append(chosen) }
                if signature.integrity != .sha256 { try w.appendMessageIntegrity(key: signature.key) }
                if signature.integrity != .sha1 { try w.appendMessageIntegritySHA256(key: signature.key) }
            }
            try afterIntegrity(&w)
            if fingerprint { try w.appendFingerprint() }
            return w.count
        }
        return Array(buffer[0..<count])
    }

    /// A request of `method`.
    static func request(
        _ method: Method, transactionID: TransactionID = .random(), signature: LongTermSignature? = nil,
        fingerprint: Bool = false, _ body: StunBody = { _ in }
    ) throws -> [UInt8] {
        try build(
            MessageType(method: method, messageClass: .request), transactionID: transactionID, signature: signature,
            fingerprint: fingerprint, body)
    }

    /// A Send indication carrying `payload` to `peer` (RFC 8656 §11.1).
    static func sendIndication(to peer: TransportAddress, payload: [UInt8], fingerprint: Bool = false) throws -> [UInt8]
    {
        try build(MessageType(method: .send, messageClass: .indication), fingerprint: fingerprint) { w in
            try w.append(XORPeerAddress(address: peer))
            try w.append(DataAttribute(bytes: payload))
        }
    }

    /// A ChannelData message as sent over UDP: no padding (RFC 8656 §12.4).
    static func channelData(_ channel: UInt16, _ payload: [UInt8]) -> [UInt8] {
        [UInt8(channel >> 8), UInt8(channel & 0xFF), UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
    }

    /// A Binding request with nothing in it.
    static func binding(transactionID: TransactionID = .random(), fingerprint: Bool = false) throws -> [UInt8] {
        try request(.binding, transactionID: transactionID, fingerprint: fingerprint)
    }
}

/// A STUN message received by a test, copied out of the buffer it arrived in and parsed.
struct ReceivedStun: CustomStringConvertible {
    let bytes: [UInt8]
    let type: MessageType
    let transactionID: TransactionID
    /// Every attribute type in the message, in order (integrity and fingerprint included).
    let attributeTypes: [AttributeType]

    init(_ bytes: [UInt8]) throws {
        self.bytes = bytes
        (type, transactionID, attributeTypes) = try bytes.withUnsafeBytes { raw in
            let message = try StunMessage(parsing: raw)
            var types: [AttributeType] = []
            var it = message.allAttributes
            while let a = it.next() { types.append(a.type) }
            return (message.type, message.transactionID, types)
        }
    }

    /// The first attribute of `A`'s type, decoded; nil when absent or malformed.
    func decode<A: StunAttributeValue>(_: A.Type) -> A? {
        bytes.withUnsafeBytes { raw in
            guard let message = try? StunMessage(parsing: raw) else { return nil }
            return try? message.decode(A.self)
        }
    }

    func contains(_ type: AttributeType) -> Bool { attributeTypes.contains(type) }

    /// MESSAGE-INTEGRITY checked under `key`.
    func integrity(key: [UInt8]) -> StunMessage.IntegrityResult {
        bytes.withUnsafeBytes { raw in
            guard let message = try? StunMessage(parsing: raw) else { return .invalid }
            return message.verifyIntegrity(key: key)
        }
    }

    var isSuccess: Bool { type.messageClass == .successResponse }
    var errorCode: Int? { decode(ErrorCode.self)?.code }
    var realm: String? { decode(Realm.self)?.value }
    var nonce: String? { decode(Nonce.self)?.value }
    var lifetime: UInt32? { decode(Lifetime.self)?.seconds }
    var xorMappedAddress: TransportAddress? { decode(XORMappedAddress.self)?.address }
    var xorRelayedAddress: TransportAddress? { decode(XORRelayedAddress.self)?.address }
    /// Every XOR-RELAYED-ADDRESS, in order (two in a dual allocation's answer, RFC 8656 §7.2).
    var xorRelayedAddresses: [TransportAddress] {
        bytes.withUnsafeBytes { raw in
            guard let message = try? StunMessage(parsing: raw) else { return [] }
            var found: [TransportAddress] = []
            var it = message.attributes
            while let a = it.next() {
                if a.type == .xorRelayedAddress,
                    let decoded = try? XORRelayedAddress(decoding: a.value, transactionID: message.transactionID) {
                    found.append(decoded.address)
                }
            }
            return found
        }
    }
    var xorPeerAddress: TransportAddress? { decode(XORPeerAddress.self)?.address }
    var data: [UInt8]? { decode(DataAttribute.self)?.bytes }
    var reservationToken: UInt64? { decode(ReservationToken.self)?.value }
    var unknownAttributes: [AttributeType]? { decode(UnknownAttributes.self)?.types }

    var description: String {
        let code = errorCode.map { " \($0)" } ?? ""
        return
            "\(type.method.rawValue)/\(type.messageClass)\(code) [\(attributeTypes.map { String($0.rawValue, radix: 16) }.joined(separator: ","))]"
    }
}

/// A parsed ChannelData message (RFC 8656 §12.4).
struct ReceivedChannelData: Equatable {
    var channel: UInt16
    var payload: [UInt8]

    init?(_ bytes: [UInt8], padded: Bool = false) {
        guard
            let parsed = bytes.withUnsafeBytes({ raw -> (UInt16, [UInt8])? in
                guard let m = try? ChannelDataMessage(parsing: raw, padded: padded) else { return nil }
                return (m.channelNumber, Array(m.data))
            })
        else { return nil }
        (channel, payload) = parsed
    }
}

extension TransportAddress {
    /// A transport address from test text such as `1.2.3.4:5` or `[::1]:5`; a typo traps.
    static func literal(_ text: String) -> TransportAddress {
        guard let address = TransportAddress(text) else { preconditionFailure("bad test address \(text)") }
        return address
    }
}

extension IPAddress {
    /// An address from test text; a typo traps.
    static func literal(_ text: String) -> IPAddress {
        guard let address = IPAddress(text) else { preconditionFailure("bad test address \(text)") }
        return address
    }
}
