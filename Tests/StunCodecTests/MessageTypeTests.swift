import StunCodec
import Testing

@Suite("Message type: method and class bits (RFC 8489 §5)")
struct MessageTypeTests {
    @Test("Every one of the 16,384 14-bit values survives rawValue → MessageType → rawValue")
    func allValuesRoundTrip() {
        var mismatches: [UInt16] = []
        for raw in UInt16(0)..<0x4000 where MessageType(rawValue: raw).rawValue != raw {
            mismatches.append(raw)
        }
        #expect(mismatches.isEmpty)
    }

    @Test("Every method × class pair survives MessageType → rawValue → MessageType")
    func allPairsRoundTrip() {
        var mismatches = 0
        for method in UInt16(0)...0xFFF {
            for messageClass in MessageClass.allCases {
                let type = MessageType(method: Method(rawValue: method), messageClass: messageClass)
                if type.rawValue > 0x3FFF || MessageType(rawValue: type.rawValue) != type { mismatches += 1 }
            }
        }
        #expect(mismatches == 0)
    }

    struct Known: Sendable, CustomTestStringConvertible {
        let method: Method
        let messageClass: MessageClass
        let rawValue: UInt16
        let testDescription: String

        init(_ name: String, _ method: Method, _ messageClass: MessageClass, _ rawValue: UInt16) {
            self.method = method
            self.messageClass = messageClass
            self.rawValue = rawValue
            testDescription = name
        }
    }

    static let known: [Known] = [
        Known("Binding request", .binding, .request, 0x0001),
        Known("Binding indication", .binding, .indication, 0x0011),
        Known("Binding success response", .binding, .successResponse, 0x0101),
        Known("Binding error response", .binding, .errorResponse, 0x0111),
        Known("Allocate request", .allocate, .request, 0x0003),
        Known("Allocate success response", .allocate, .successResponse, 0x0103),
        Known("Allocate error response", .allocate, .errorResponse, 0x0113),
        Known("Refresh request", .refresh, .request, 0x0004),
        Known("Refresh success response", .refresh, .successResponse, 0x0104),
        Known("Send indication", .send, .indication, 0x0016),
        Known("Data indication", .data, .indication, 0x0017),
        Known("CreatePermission request", .createPermission, .request, 0x0008),
        Known("CreatePermission success response", .createPermission, .successResponse, 0x0108),
        Known("ChannelBind request", .channelBind, .request, 0x0009),
        Known("ChannelBind success response", .channelBind, .successResponse, 0x0109),
        Known("ChannelBind error response", .channelBind, .errorResponse, 0x0119),
        Known("Connect request", .connect, .request, 0x000A),
        Known("ConnectionBind request", .connectionBind, .request, 0x000B),
        Known("ConnectionAttempt indication", .connectionAttempt, .indication, 0x001C),
        Known("Highest method, error response", Method(rawValue: 0xFFF), .errorResponse, 0x3FFF),
        Known("Method bit 4 lands above C0", Method(rawValue: 0x010), .request, 0x0020),
        Known("Method bit 7 lands above C1", Method(rawValue: 0x080), .request, 0x0200),
    ]

    @Test("Known method/class pairs have their wire values", arguments: known)
    func knownValues(_ k: Known) {
        let type = MessageType(method: k.method, messageClass: k.messageClass)
        #expect(type.rawValue == k.rawValue)
        #expect(MessageType(rawValue: k.rawValue) == type)
    }

    @Test("The named constants")
    func constants() {
        #expect(MessageType.bindingRequest.rawValue == 0x0001)
        #expect(MessageType.bindingSuccess.rawValue == 0x0101)
    }

    @Test("A parsed message reports its type")
    func parsedType() throws {
        let dataIndication = MessageType(method: .data, messageClass: .indication)
        let bytes = try buildMessage(dataIndication) { _ in }
        #expect(bytes[0...1] == [0x00, 0x17])
        try withMessage(bytes) { m throws in #expect(m.type == dataIndication) }
    }
}
