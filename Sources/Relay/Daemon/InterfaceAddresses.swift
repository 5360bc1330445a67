import CLibevent
import Glibc
import StunCodec

/// The host's own addresses (getifaddrs), used when no `listening-ip` / `relay-ip` is configured
/// (as coturn does), to keep the server's own service ports out of reach as peers, and to place
/// the kernel fast path (which interfaces, which egress interface).
public enum InterfaceAddresses {
    /// Up interfaces' IPv4 and IPv6 addresses; IPv6 link-local ones are skipped (they need a scope).
    public static func current() -> [IPAddress] {
        var result: [IPAddress] = []
        forEachUp { _, address in
            guard let address, !(address.family == .ipv6 && address.high >> 54 == 0x3FA) else { return }
            if !result.contains(address) { result.append(address) }
        }
        return result
    }

    /// Names of the up interfaces that carry one of `addresses` (every up interface when one of
    /// them is a wildcard address), in the order getifaddrs lists them.
    public static func names(carrying addresses: [IPAddress]) -> [String] {
        let wildcard = addresses.contains { $0.isWildcard }
        var result: [String] = []
        forEachUp { name, address in
            let carries = wildcard || address.map { addresses.contains($0) } == true
            if carries && !result.contains(name) { result.append(name) }
        }
        return result
    }

    /// The interface index of each up interface's addresses (the first interface listed when an
    /// address appears on several).
    public static func indexes() -> [IPAddress: UInt32] {
        var result: [IPAddress: UInt32] = [:]
        forEachUp { name, address in
            guard let address, result[address] == nil else { return }
            let index = if_nametoindex(name)
            if index != 0 { result[address] = index }
        }
        return result
    }

    /// Calls `body` with each getifaddrs entry of an up interface: its name and its address
    /// (nil for entries without an IPv4 or IPv6 address).
    private static func forEachUp(_ body: (String, IPAddress?) -> Void) {
        var head: UnsafeMutablePointer<ifaddrs>? = nil
        guard getifaddrs(&head) == 0, let first = head else { return }
        defer { freeifaddrs(head) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard entry.pointee.ifa_flags & UInt32(IFF_UP) != 0, let name = entry.pointee.ifa_name else { continue }
            let address = entry.pointee.ifa_addr.flatMap { SocketAddress.read(UnsafeRawPointer($0)) }?.ip
            body(String(cString: name), address)
        }
    }
}
