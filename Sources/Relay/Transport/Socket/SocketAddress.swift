import CLibevent
import Glibc
import StunCodec

/// Conversion between `TransportAddress` and the kernel's sockaddr structures.
enum SocketAddress {
    /// Writes `address` as sockaddr_in or sockaddr_in6 into `storage`; returns its length.
    static func write(_ address: TransportAddress, into storage: UnsafeMutableRawPointer) -> socklen_t {
        switch address.ip.family {
        case .ipv4:
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = address.port.bigEndian
            sin.sin_addr.s_addr = UInt32(truncatingIfNeeded: address.ip.low).bigEndian
            storage.storeBytes(of: sin, as: sockaddr_in.self)
            return socklen_t(MemoryLayout<sockaddr_in>.size)
        case .ipv6:
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = address.port.bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { bytes in
                bytes.storeBytes(of: address.ip.high.bigEndian, toByteOffset: 0, as: UInt64.self)
                bytes.storeBytes(of: address.ip.low.bigEndian, toByteOffset: 8, as: UInt64.self)
            }
            storage.storeBytes(of: sin6, as: sockaddr_in6.self)
            return socklen_t(MemoryLayout<sockaddr_in6>.size)
        }
    }

    /// Reads a sockaddr_in or sockaddr_in6; nil for other families.
    static func read(_ storage: UnsafeRawPointer) -> TransportAddress? {
        let family = storage.load(as: sockaddr.self).sa_family
        switch Int32(family) {
        case AF_INET:
            let sin = storage.load(as: sockaddr_in.self)
            return TransportAddress(ip: IPAddress(ipv4: UInt32(bigEndian: sin.sin_addr.s_addr)), port: UInt16(bigEndian: sin.sin_port))
        case AF_INET6:
            var sin6 = storage.load(as: sockaddr_in6.self)
            let (high, low) = withUnsafeBytes(of: &sin6.sin6_addr) { bytes in
                (
                    UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                    UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                )
            }
            return TransportAddress(ip: IPAddress(ipv6High: high, low: low), port: UInt16(bigEndian: sin6.sin6_port))
        default:
            return nil
        }
    }
}
