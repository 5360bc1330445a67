import StunCodec

/// libFuzzer's entry point (https://llvm.org/docs/LibFuzzer.html): one input through every
/// StunCodec decoder that reads bytes off the network. Rejected input is fine; a crash, an
/// over-read (AddressSanitizer) or a broken invariant (`require`) is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDecoders(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    DecoderFuzzer.message(input)
    DecoderFuzzer.channelData(input)
    DecoderFuzzer.stream(input)
    DecoderFuzzer.classic(input)
    return 0
}

/// The checks behind `fuzzDecoders`, one per way bytes reach the codec.
enum DecoderFuzzer {
    /// A datagram as an RFC 3489 Binding request (`rfc3489-compatibility`): when it parses, it
    /// was exactly the header's length, and the echoed transaction ID is its 16 bytes.
    static func classic(_ bytes: UnsafeRawBufferPointer) {
        guard let request = try? ClassicBindingRequest(parsing: bytes) else { return }
        require(request.length == bytes.count && request.transactionID.count == 16, "classic request misread")
        require(Array(bytes[4..<20]) == request.transactionID, "classic transaction ID misread")
    }

    /// Keys under which the seed corpus's integrity attributes verify: the RFC 5769 short-term
    /// password, the RFC 5769 §2.4 long-term key, and MD5("alice:relayd.test:secret") of
    /// Fuzz/make_corpus.py.
    static let keys: [[UInt8]] = [
        Array("VOkJxbRl1RmTxUk/WvJxBt".utf8),
        [0xE8, 0xCA, 0x7A, 0xD5, 0x9D, 0x5E, 0xB0, 0x51, 0x8E, 0x31, 0x29, 0x11, 0xD2, 0xDA, 0xB2, 0xA9],
        [0xF2, 0x2C, 0xE4, 0xDD, 0x6A, 0xD3, 0x58, 0xA8, 0xE8, 0x4A, 0x4F, 0x15, 0x69, 0xAE, 0xD1, 0x0C],
    ]

    /// A datagram or stream frame as a STUN message (RFC 8489 §6): when it parses, every
    /// attribute lies inside the message, decodes as its typed attribute (when it has one)
    /// and survives re-encoding, the integrity check runs under each key, and the writer
    /// reproduces the message.
    static func message(_ bytes: UnsafeRawBufferPointer) {
        guard let message = try? StunMessage(parsing: bytes) else { return }
        var all = message.allAttributes
        var count = 0
        while let attribute = all.next() {
            require(
                attribute.offset >= 20 && attribute.offset + 4 + attribute.value.count <= bytes.count,
                "attribute at \(attribute.offset) runs past the message")
            touch(attribute.value)
            decodeTyped(attribute, transactionID: message.transactionID)
            count += 1
        }
        var trusted = message.attributes
        while let attribute = trusted.next() {
            require(
                attribute.offset + 4 + attribute.value.count <= message.trustedEnd,
                "trusted attribute at \(attribute.offset) ends after trustedEnd \(message.trustedEnd)")
            require(
                message.attribute(attribute.type) != nil,
                "attribute(\(attribute.type.rawValue)) misses one that is there")
        }
        for key in keys {
            _ = key.withUnsafeBytes { message.verifyIntegrity(key: $0) }
        }
        rewrite(message, attributeCount: count)
        resign(message)
    }

    /// Every typed attribute whose type matches decodes without trapping, and what it decodes
    /// to survives encode → decode unchanged (the symmetry of STYLE.md).
    static func decodeTyped(_ attribute: RawAttribute, transactionID: TransactionID) {
        for type in typedAttributes where type.attributeType == attribute.type {
            roundTrip(type, attribute.value, transactionID: transactionID)
        }
    }

    /// Every typed attribute in Sources/StunCodec/Attributes.
    static let typedAttributes: [any (StunAttributeValue & Equatable).Type] = [
        AdditionalAddressFamily.self, AddressErrorCode.self, AlternateDomain.self, AlternateServer.self,
        ChangeRequest.self, ChannelNumber.self, ConnectionID.self, DataAttribute.self, DontFragment.self,
        ErrorCode.self, EvenPort.self, Fingerprint.self, ICEControlled.self, ICEControlling.self, ICMP.self,
        Lifetime.self, MappedAddress.self, MessageIntegrity.self, MobilityTicket.self, MessageIntegritySHA256.self, Nonce.self,
        OtherAddress.self, Padding.self, PasswordAlgorithm.self, PasswordAlgorithms.self, Priority.self,
        Realm.self, RequestedAddressFamily.self, RequestedTransport.self, ReservationToken.self,
        ResponseOrigin.self, ResponsePort.self, Software.self, UnknownAttributes.self, UseCandidate.self,
        Userhash.self, Username.self, XORMappedAddress.self, XORPeerAddress.self, XORRelayedAddress.self,
    ]

    static func roundTrip<A: StunAttributeValue & Equatable>(
        _: A.Type, _ value: UnsafeRawBufferPointer, transactionID: TransactionID
    ) {
        guard let decoded = try? A(decoding: value, transactionID: transactionID) else { return }
        // Exactly encodedLength bytes: AddressSanitizer reports a write past them.
        let encoded = UnsafeMutableRawBufferPointer.allocate(byteCount: decoded.encodedLength, alignment: 8)
        defer { encoded.deallocate() }
        decoded.encode(into: encoded, transactionID: transactionID)
        let again = try? A(decoding: UnsafeRawBufferPointer(encoded), transactionID: transactionID)
        require(
            again == decoded,
            "\(A.self) \(decoded) re-encodes to \(Array(encoded)), which decodes to \(String(describing: again))")
    }

    /// Writing the same attributes with `StunMessageWriter` (raw values, FINGERPRINT recomputed)
    /// gives a message of the same size that parses to the same structure.
    static func rewrite(_ message: StunMessage, attributeCount: Int) {
        var copy = [UInt8](repeating: 0, count: message.bytes.count)
        copy.withUnsafeMutableBytes { buffer in
            do {
                var writer = try StunMessageWriter(
                    into: buffer, type: message.type, transactionID: message.transactionID)
                var all = message.allAttributes
                while let attribute = all.next() {
                    if attribute.type == .fingerprint {
                        try writer.appendFingerprint()
                    } else {
                        try writer.append(attribute.type, value: attribute.value)
                    }
                }
                require(
                    writer.count == message.bytes.count,
                    "rewrite is \(writer.count) bytes, not \(message.bytes.count)")
            } catch {
                fail("rewriting a parsed message failed: \(error)")
            }
            require(
                buffer[0] == message.bytes[0] && buffer[1] == message.bytes[1],
                "message type \(message.type) does not survive rawValue round trip")
            let again: StunMessage
            do {
                again = try StunMessage(parsing: UnsafeRawBufferPointer(buffer))
            } catch {
                fail("rewritten message does not parse: \(error)")
            }
            require(again.type == message.type && again.transactionID == message.transactionID, "header changed")
            require(
                again.integrityOffset == message.integrityOffset
                    && again.integritySHA256Offset == message.integritySHA256Offset
                    && again.fingerprintOffset == message.fingerprintOffset
                    && again.trustedEnd == message.trustedEnd
                    && again.ignoredAfterIntegrity == message.ignoredAfterIntegrity,
                "rewritten message indexes differently")
            var a = message.allAttributes
            var b = again.allAttributes
            var seen = 0
            while let x = a.next() {
                guard let y = b.next() else { fail("rewritten message lost attributes") }
                require(x.type == y.type && x.offset == y.offset, "attribute \(seen) moved or changed type")
                require(x.type == .fingerprint || x.value.elementsEqual(y.value), "attribute \(seen) changed value")
                seen += 1
            }
            require(b.next() == nil && seen == attributeCount, "rewritten message gained attributes")
        }
    }

    /// The attributes that count, signed again with MESSAGE-INTEGRITY, MESSAGE-INTEGRITY-SHA256
    /// and FINGERPRINT by the writer, verify as `.valid` under the same key and `.invalid`
    /// under another (RFC 8489 §14.5, §14.6).
    static func resign(_ message: StunMessage) {
        var signed = [UInt8](repeating: 0, count: message.trustedEnd + 24 + 36 + 8)
        keys[0].withUnsafeBytes { key in
            keys[1].withUnsafeBytes { otherKey in
                signed.withUnsafeMutableBytes { buffer in
                    var length = 0
                    do {
                        var writer = try StunMessageWriter(
                            into: buffer, type: message.type, transactionID: message.transactionID)
                        var trusted = message.attributes
                        while let attribute = trusted.next() {
                            try writer.append(attribute.type, value: attribute.value)
                        }
                        try writer.appendMessageIntegrity(key: key)
                        try writer.appendMessageIntegritySHA256(key: key)
                        try writer.appendFingerprint()
                        length = writer.count
                    } catch {
                        // A message whose trusted part already fills 64 KiB has no room left.
                        require(message.trustedEnd + 24 + 36 + 8 - 20 > 0xFFFF, "re-signing failed: \(error)")
                        return
                    }
                    let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<length])
                    do {
                        let again = try StunMessage(parsing: bytes)
                        require(again.verifyIntegrity(key: key) == .valid, "writer's integrity does not verify")
                        require(
                            again.verifyIntegrity(key: otherKey) == .invalid,
                            "integrity verifies under the wrong key")
                    } catch {
                        fail("re-signed message does not parse: \(error)")
                    }
                }
            }
        }
    }

    /// A datagram as TURN ChannelData (RFC 8656 §12.4), and a stream frame as padded ChannelData
    /// (§12.5): `data` is a view inside the input, right after the 4-byte header.
    static func channelData(_ bytes: UnsafeRawBufferPointer) {
        for padded in [false, true] {
            guard let message = try? ChannelDataMessage(parsing: bytes, padded: padded) else { continue }
            require(
                ChannelDataMessage.channelRange.contains(message.channelNumber),
                "channel \(message.channelNumber) outside channelRange")
            require(message.data.baseAddress == bytes.baseAddress.map { $0 + 4 }, "data does not follow the header")
            let encoded = ChannelDataMessage.encodedLength(dataLength: message.data.count, padded: padded)
            require(
                padded ? encoded == bytes.count : encoded <= bytes.count && bytes.count - encoded < 4,
                "ChannelData of \(message.data.count) bytes accepted in \(bytes.count) (padded: \(padded))")
            touch(message.data)
        }
    }

    /// The input as a TCP/TLS byte stream (RFC 8489 §6.2.2, RFC 8656 §12.5), frame by frame:
    /// each frame is non-empty and inside the input, every strict prefix of it asks for more
    /// bytes, and the message parsers accept the frame's header as the framer did.
    static func stream(_ input: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < input.count {
            let rest = UnsafeRawBufferPointer(rebasing: input[offset...])
            let frame: StreamFramer.Frame
            do {
                guard let next = try StreamFramer.nextFrame(in: rest) else { return }
                frame = next
            } catch {
                return
            }
            require(frame.length > 0 && frame.length <= rest.count, "frame of \(frame.length) in \(rest.count) bytes")
            let bytes = UnsafeRawBufferPointer(rebasing: rest[0..<frame.length])
            for n in 0..<frame.length {
                require(
                    waitsForMore(UnsafeRawBufferPointer(rebasing: bytes[0..<n])),
                    "framer does not wait for more bytes at \(n) of \(frame.length)")
            }
            switch frame.kind {
            case .stun:
                do throws(StunDecodeError) {
                    _ = try StunMessage(parsing: bytes)
                } catch {
                    switch error {
                    case .truncated, .notStun, .badMagicCookie, .badMessageLength:
                        fail("framer accepted a STUN header the parser rejects: \(error)")
                    default:
                        break
                    }
                }
                if frame.length < input.count { message(bytes) }  // else `fuzzDecoders` already did
            case .channelData:
                do {
                    _ = try ChannelDataMessage(parsing: bytes, padded: true)
                } catch {
                    fail("framer accepted a ChannelData frame the parser rejects: \(error)")
                }
            case .other:
                fail("framer returned a frame of kind .other")
            }
            offset += frame.length
        }
    }

    /// True when the framer answers "need more bytes" (nil) rather than a frame or an error.
    static func waitsForMore(_ prefix: UnsafeRawBufferPointer) -> Bool {
        do {
            return try StreamFramer.nextFrame(in: prefix) == nil
        } catch {
            return false
        }
    }
}

/// Reads every byte so that AddressSanitizer sees an over-read, and keeps the read alive.
@inline(never)
func touch(_ bytes: UnsafeRawBufferPointer) {
    var sum: UInt8 = 0
    for byte in bytes { sum &+= byte }
    touchSink &+= sum
}

nonisolated(unsafe) var touchSink: UInt8 = 0

/// A broken invariant: trap with a message so libFuzzer records the input.
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
}

/// Traps with `message`; libFuzzer writes the input to fuzz-artifacts/.
func fail(_ message: String) -> Never {
    fatalError("fuzz invariant: \(message)")
}
