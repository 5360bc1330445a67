import Relay
import RelayCore
import StunCodec

/// A `RelaySocketProvider` for driving `RelayCore` without the network: it hands out fake
/// descriptors, remembers what each is bound to, counts opens and closes, and refuses the ports
/// in `refusedPorts` (or an address already bound) the way the kernel answers EADDRINUSE.
final class FakeRelaySocketProvider: RelaySocketProvider {
    /// Ports another process is pretending to hold; opening them fails.
    var refusedPorts: Set<UInt16> = []
    private(set) var opens = 0
    private(set) var closes = 0
    /// Attempts that failed because the port was refused or the address was already bound.
    private(set) var refusals = 0
    /// Live descriptors and the address each is bound to.
    private(set) var bound: [Int32: TransportAddress] = [:]
    /// Every descriptor closed so far, in order.
    private(set) var closed: [Int32] = []
    private var nextDescriptor: Int32 = 100

    func openRelaySocket(bound address: TransportAddress) -> Int32? {
        if refusedPorts.contains(address.port) || bound.values.contains(address) {
            refusals += 1
            return nil
        }
        let descriptor = nextDescriptor
        nextDescriptor += 1
        opens += 1
        bound[descriptor] = address
        return descriptor
    }

    func closeRelaySocket(_ socket: Int32) {
        precondition(bound[socket] != nil, "closing relay socket \(socket) that is not open")
        closes += 1
        bound[socket] = nil
        closed.append(socket)
    }

    /// The live descriptor bound to `address`.
    func descriptor(boundTo address: TransportAddress) -> Int32? {
        bound.first { $0.value == address }?.key
    }
}
