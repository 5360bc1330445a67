import CRelayFastPath
import StunCodec

/// What one side sends: the frame template and, per flow, the ports and channel number the
/// generator writes into it. Every flow of a side shares the template's two IPv4 addresses.
struct TrafficPlan {
    var frame: [UInt8]
    var flows: [relayd_loadgen_flow]

    /// Client side: ChannelData from each client to the relay's listening address (RFC 8656
    /// §12.4), or raw UDP to the peer when the flows have no relay (channel 0). Peer side: raw UDP
    /// from the peer to each relayed address, or to each client without a relay.
    init(_ list: FlowList, options: LoadgenOptions, sourceMAC: [UInt8]) throws(LoadgenError) {
        let relayed = list.flows.allSatisfy { $0.channel != 0 }
        var pairs: [(source: TransportAddress, destination: TransportAddress, channel: UInt16)] = []
        for flow in list.flows {
            switch options.side {
            case .client:
                guard relayed else {
                    pairs.append((flow.client, list.peer, 0))
                    continue
                }
                guard let server = options.server else { throw LoadgenError("the client side needs --server") }
                pairs.append((flow.client, server, flow.channel))
            case .peer:
                pairs.append((list.peer, relayed ? flow.relayed : flow.client, 0))
            }
        }
        guard let first = pairs.first, first.source.ip.family == .ipv4,
            pairs.allSatisfy({ $0.source.ip == first.source.ip && $0.destination.ip == first.destination.ip })
        else { throw LoadgenError("the flows of a side must share one IPv4 source and one destination address") }
        guard pairs.count <= Int(RELAYD_LOADGEN_MAX_FLOWS) else {
            throw LoadgenError("at most \(RELAYD_LOADGEN_MAX_FLOWS) flows")
        }
        let channelData = options.side == .client && relayed
        var payload = [UInt8](repeating: 0x5A, count: options.payloadSize)
        if channelData {
            payload = [0x40, 0x00, UInt8(options.payloadSize >> 8), UInt8(options.payloadSize & 0xFF)] + payload
        }
        frame = Self.frame(
            from: first.source.ip, to: first.destination.ip, sourceMAC: sourceMAC, destinationMAC: options.gatewayMAC,
            payload: payload)
        flows = pairs.map { pair in
            relayd_loadgen_flow(
                source_port: pair.source.port.bigEndian, destination_port: pair.destination.port.bigEndian,
                channel: pair.channel.bigEndian, reserved: 0)
        }
    }

    /// Ethernet, IPv4 (no options, DF, a correct header checksum: the generator never changes the
    /// header) and UDP with a zero checksum (none, which IPv4 allows); the ports are the
    /// generator's to write.
    static func frame(from source: IPAddress, to destination: IPAddress, sourceMAC: [UInt8], destinationMAC: [UInt8],
                      payload: [UInt8]) -> [UInt8] {
        let udpLength = 8 + payload.count
        let totalLength = 20 + udpLength
        var ip: [UInt8] = [0x45, 0, UInt8(totalLength >> 8), UInt8(totalLength & 0xFF), 0, 0, 0x40, 0, 64, 17, 0, 0]
        ip += (0..<4).map { source.byte($0) } + (0..<4).map { destination.byte($0) }
        var sum: UInt32 = 0
        for i in stride(from: 0, to: ip.count, by: 2) { sum += UInt32(ip[i]) << 8 | UInt32(ip[i + 1]) }
        while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
        let check = ~UInt16(sum)
        ip[10] = UInt8(check >> 8)
        ip[11] = UInt8(check & 0xFF)
        let udp: [UInt8] = [0, 0, 0, 0, UInt8(udpLength >> 8), UInt8(udpLength & 0xFF), 0, 0]
        return destinationMAC + sourceMAC + [0x08, 0x00] + ip + udp + payload
    }
}
