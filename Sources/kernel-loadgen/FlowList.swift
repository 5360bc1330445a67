import Glibc
import StunCodec

/// The flows relay-bench set up (`--flows-file`): the external peer, and per client its
/// address, channel number (0 without a relay) and relayed address.
struct FlowList {
    struct Flow {
        var client: TransportAddress
        var channel: UInt16
        var relayed: TransportAddress
    }

    var peer: TransportAddress
    var flows: [Flow]

    /// Reads the file; throws what is wrong with it.
    static func read(_ path: String) throws(LoadgenError) -> FlowList {
        guard let file = fopen(path, "r") else { throw LoadgenError("cannot read \(path)") }
        defer { fclose(file) }
        var peer: TransportAddress?
        var flows: [Flow] = []
        var line = [CChar](repeating: 0, count: 512)
        var number = 0
        while fgets(&line, Int32(line.count), file) != nil {
            number += 1
            let fields = line.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }.split(separator: " ").map { $0.trimmingTrailingNewline }
            func address(_ ip: Int) -> TransportAddress? {
                guard fields.count > ip + 1, let address = IPAddress(fields[ip]), let port = UInt16(fields[ip + 1])
                else { return nil }
                return TransportAddress(ip: address, port: port)
            }
            switch fields.first {
            case "peer":
                peer = address(1)
            case "flow":
                guard fields.count == 6, let client = address(1), let channel = UInt16(fields[3]),
                    let relayed = address(4)
                else { throw LoadgenError("\(path):\(number): not a flow line") }
                flows.append(Flow(client: client, channel: channel, relayed: relayed))
            default:
                throw LoadgenError("\(path):\(number): unknown line")
            }
        }
        guard let peer, !flows.isEmpty else { throw LoadgenError("\(path): no peer or no flows") }
        return FlowList(peer: peer, flows: flows)
    }
}

extension Substring {
    fileprivate var trimmingTrailingNewline: String {
        var text = String(self)
        while text.last == "\n" || text.last == "\r" { text.removeLast() }
        return text
    }
}
