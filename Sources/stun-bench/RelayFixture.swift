import Logging
import Relay
import RelayCore
import StunCodec

/// A `RelayCore` set up with real requests (untimed) for the data-path benchmarks: client A with
/// a channel to a public peer and a permission for a second one, and client B on the same core,
/// A and B bound to each other's relayed address by channels (relay-to-relay short-circuit).
final class RelayFixture {
    let core: RelayCore
    let provider = BenchSockets()
    let now: Int64 = 1_700_000_000

    static let server = TransportAddress(ip: IPAddress(ipv4: 0x0A00_0005), port: 3478)
    static let clientA = TransportAddress(ip: IPAddress(ipv4: 0xC000_0201), port: 40001)
    static let clientB = TransportAddress(ip: IPAddress(ipv4: 0xC000_0202), port: 40002)
    static let channelPeer = TransportAddress(ip: IPAddress(ipv4: 0x0102_0304), port: 5000)
    static let indicationPeer = TransportAddress(ip: IPAddress(ipv4: 0x0506_0708), port: 6000)

    var relayedA = TransportAddress(ip: .ipv4Any, port: 0)
    var relayedB = TransportAddress(ip: .ipv4Any, port: 0)
    var socketA = RelaySocket(descriptor: -1)

    /// ChannelData on 0x4001 (to `channelPeer`) and 0x4002 (to B), 100 bytes, from A.
    let toPeer: UnsafeRawBufferPointer
    let toB: UnsafeRawBufferPointer
    /// A receive buffer laid out as the I/O layer reads into: headroom, 100-byte payload, tailroom.
    let peerBuffer: UnsafeMutableRawBufferPointer
    var payloadRange: Range<Int> { RelayCore.peerHeadroom..<RelayCore.peerHeadroom + 100 }

    /// How client B reaches the server (TCP: its allocation takes handed-off packets).
    let transportB: TransportProtocol

    /// `loop` of `loops` loop threads sharing `directory` (the cross-thread short-circuit); with
    /// `maxBPS` > 0 every allocation has a `max-bps` budget that each relayed packet is charged to.
    static let ports: ClosedRange<UInt16> = 50000...50099

    /// The node's relay port pool, which the loops of one node share.
    static func portPool() -> RelayPortPool { RelayPortPool(range: ports, addresses: [server.ip]) }

    init(
        loop: Int = 0, of loops: Int = 1, directory: RelayedAddressDirectory = RelayedAddressDirectory(),
        ledger: any AdmissionLedger = LocalAdmissionLedger(), transportB: TransportProtocol = .udp,
        maxBPS: Int = 0, ports: RelayPortPool = RelayFixture.portPool()
    ) throws {
        self.transportB = transportB
        var c = RelayConfiguration()
        c.noAuth = true
        c.listeningIPs = [Self.server.ip]
        c.relayIPs = [Self.server.ip]
        c.minPort = Self.ports.lowerBound
        c.maxPort = Self.ports.upperBound
        c.maxBPS = maxBPS
        let context = CoreContext(
            configuration: c, nonceKey: Array(0..<32), ledger: ledger, directory: directory, threadIndex: loop,
            threadCount: loops, ports: ports)
        let channelDataToPeer = UnsafeMutableRawBufferPointer.allocate(byteCount: 104, alignment: 8)
        toPeer = UnsafeRawBufferPointer(channelDataToPeer)
        let channelDataToB = UnsafeMutableRawBufferPointer.allocate(byteCount: 104, alignment: 8)
        toB = UnsafeRawBufferPointer(channelDataToB)
        peerBuffer = UnsafeMutableRawBufferPointer.allocate(
            byteCount: RelayCore.peerHeadroom + 100 + RelayCore.peerTailroom, alignment: 16)
        core = RelayCore(context: context, logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() })
        core.addUDPListener(Self.server, socket: ClientSocket(descriptor: 3 + Int32(loop)))
        ChannelDataMessage.writeHeader(into: channelDataToPeer, channelNumber: 0x4001, length: 100)
        ChannelDataMessage.writeHeader(into: channelDataToB, channelNumber: 0x4002, length: 100)
        for i in 4..<104 {
            channelDataToPeer[i] = UInt8(truncatingIfNeeded: i)
            channelDataToB[i] = UInt8(truncatingIfNeeded: i)
        }
        relayedA = try allocate(from: Self.clientA)
        relayedB = try allocate(from: Self.clientB)
        socketA = provider.sockets.first { $0.value == relayedA }!.key
        try request(.channelBind, from: Self.clientA) { w throws(StunEncodeError) in
            try w.append(ChannelNumber(value: 0x4001))
            try w.append(XORPeerAddress(address: Self.channelPeer))
        }
        try request(.createPermission, from: Self.clientA) { w throws(StunEncodeError) in
            try w.append(XORPeerAddress(address: Self.indicationPeer))
        }
        try request(.channelBind, from: Self.clientA) { w throws(StunEncodeError) in
            try w.append(ChannelNumber(value: 0x4002))
            try w.append(XORPeerAddress(address: self.relayedB))
        }
        try request(.channelBind, from: Self.clientB) { w throws(StunEncodeError) in
            try w.append(ChannelNumber(value: 0x4003))
            try w.append(XORPeerAddress(address: self.relayedA))
        }
    }

    func origin(_ client: TransportAddress) -> ClientOrigin {
        let transport = client == Self.clientB ? transportB : .udp
        return ClientOrigin(
            fiveTuple: FiveTuple(client: client, server: Self.server, transport: transport),
            socket: ClientSocket(descriptor: transport == .udp ? 3 + Int32(core.context.threadIndex) : 90))
    }

    @discardableResult
    func request(
        _ method: Method, from client: TransportAddress, _ body: (inout StunMessageWriter) throws(StunEncodeError) -> Void
    ) throws -> StunMessage.Copy {
        var buffer = [UInt8](repeating: 0, count: 512)
        let length = try buffer.withUnsafeMutableBytes { raw throws -> Int in
            var w = try StunMessageWriter(
                into: raw, type: MessageType(method: method, messageClass: .request), transactionID: .random())
            try body(&w)
            return w.count
        }
        buffer.removeSubrange(length...)
        buffer.withUnsafeBytes { core.handleClientPacket($0, from: origin(client), now: now) }
        answerRelayOpens()
        defer { core.outbox.reset() }
        guard let packet = core.outbox.packets.first else { throw BenchError.invalidFixture("no answer to \(method)") }
        let copy = try StunMessage.Copy(Array(packet.bytes))
        guard copy.isSuccess else { throw BenchError.invalidFixture("\(method) failed") }
        return copy
    }

    /// Executes the core's `openRelaySocket` commands and answers them, as the loop does after a
    /// flush, until the core asks for no more.
    func answerRelayOpens() {
        while true {
            var opens: [(RelaySocketOpen, RelaySocketOpening)] = []
            for case .openRelaySocket(let request) in core.outbox.commands { opens.append((request, provider.open(request))) }
            guard !opens.isEmpty else { return }
            core.outbox.reset()
            for (request, opening) in opens { core.relaySocketOpened(request, opening, now: now) }
        }
    }

    func allocate(from client: TransportAddress) throws -> TransportAddress {
        let answer = try request(.allocate, from: client) { w throws(StunEncodeError) in
            try w.append(RequestedTransport.udp)
        }
        guard let relayed = answer.relayed else { throw BenchError.invalidFixture("no XOR-RELAYED-ADDRESS") }
        return relayed
    }

}

/// Relay "sockets" that are only numbers: the benchmark measures the core, not the kernel.
final class BenchSockets {
    var sockets: [RelaySocket: TransportAddress] = [:]
    var next: Int32 = 100

    func open(_ request: RelaySocketOpen) -> RelaySocketOpening {
        next += 1
        sockets[RelaySocket(descriptor: next)] = request.address
        return .opened(RelaySocket(descriptor: next))
    }
}

extension StunMessage {
    /// A parsed response that owns its bytes, for setup code.
    struct Copy {
        let bytes: [UInt8]
        let isSuccess: Bool
        let relayed: TransportAddress?

        init(_ bytes: [UInt8]) throws {
            self.bytes = bytes
            let (success, relayed) = try bytes.withUnsafeBytes { raw throws -> (Bool, TransportAddress?) in
                let message = try StunMessage(parsing: raw)
                return (
                    message.type.messageClass == .successResponse, try message.decode(XORRelayedAddress.self)?.address
                )
            }
            isSuccess = success
            self.relayed = relayed
        }
    }
}
