import CLibevent
import Glibc
import StunCodec

/// The host's own addresses (getifaddrs), used when no `listening-ip` / `relay-ip` is configured
/// (as coturn does) and to keep the server's own service ports out of reach as peers.
public enum InterfaceAddresses {
    /// Up interfaces' IPv4 and IPv6 addresses; IPv6 link-local ones are skipped (they need a scope).
    public static func current() -> [IPAddress] {
        var head: UnsafeMutablePointer<ifaddrs>? = nil
        guard getifaddrs(&head) == 0, let first = head else { return [] }
        defer { freeifaddrs(head) }
        var result: [IPAddress] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let addr = entry.pointee.ifa_addr, entry.pointee.ifa_flags & UInt32(IFF_UP) != 0,
                let address = SocketAddress.read(UnsafeRawPointer(addr))
            else { continue }
            if address.ip.family == .ipv6 && address.ip.high >> 54 == 0x3FA { continue }
            if !result.contains(address.ip) { result.append(address.ip) }
        }
        return result
    }
}

extension InterfaceAddresses {
    /// Names of the up interfaces that carry one of `addresses` (every up interface when one of
    /// them is a wildcard address), in the order getifaddrs lists them.
    public static func names(carrying addresses: [IPAddress]) -> [String] {
        let wildcard = addresses.contains { $0 == .ipv4Any || $0 == .ipv6Any }
        var head: UnsafeMutablePointer<ifaddrs>? = nil
        guard getifaddrs(&head) == 0, let first = head else { return [] }
        defer { freeifaddrs(head) }
        var result: [String] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard entry.pointee.ifa_flags & UInt32(IFF_UP) != 0, let name = entry.pointee.ifa_name else { continue }
            let carries =
                wildcard
                || entry.pointee.ifa_addr.flatMap { SocketAddress.read(UnsafeRawPointer($0)) }.map {
                    addresses.contains($0.ip)
                } == true
            let text = String(cString: name)
            if carries && !result.contains(text) { result.append(text) }
        }
        return result
    }
}

extension InterfaceAddresses {
    /// The interface index of each up interface's addresses (the first interface listed when an
    /// address appears on several).
    public static func indexes() -> [IPAddress: UInt32] {
        var head: UnsafeMutablePointer<ifaddrs>? = nil
        guard getifaddrs(&head) == 0, let first = head else { return [:] }
        defer { freeifaddrs(head) }
        var result: [IPAddress: UInt32] = [:]
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard entry.pointee.ifa_flags & UInt32(IFF_UP) != 0, let name = entry.pointee.ifa_name,
                let addr = entry.pointee.ifa_addr, let address = SocketAddress.read(UnsafeRawPointer(addr))
            else { continue }
            let index = if_nametoindex(name)
            if index != 0 && result[address.ip] == nil { result[address.ip] = index }
        }
        return result
    }
}
