import RelayCore
import StunCodec

/// Which loop's UDP listener a client's datagrams reach: the same choice the listeners'
/// SO_REUSEPORT selector makes in the kernel (`relayd_attach_listener_selector`,
/// docs/mobility.md), from the source address's last 32 bits and the source port. An allocation
/// restored from the state journal goes to the loop its client's datagrams reach
/// (docs/state-journal.md).
enum ListenerSelector {
    static func loop(for client: TransportAddress, loops: Int) -> Int {
        // The last 32 bits of either family, as the kernel loads them (network order).
        let word = UInt32(truncatingIfNeeded: client.ip.low)
        var a = UInt32(client.port) &* 0x9E37_79B1
        a ^= word
        let x = a
        a >>= 16
        a ^= x
        return Int(a % UInt32(max(1, loops)))
    }
}
