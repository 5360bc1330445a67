import Glibc

extension UDPSocket {
    /// DONT-FRAGMENT for a relay socket (RFC 8656 §7.2, §18.9): IPv4 datagrams leave with DF set and
    /// are never fragmented by this host (`IP_PMTUDISC_DO`); IPv6 ones are never fragmented
    /// (`IPV6_DONTFRAG`). A datagram that does not fit the path MTU then fails to send
    /// (EMSGSIZE) and is counted as a send failure instead of going out in fragments. False
    /// when the kernel refused the option.
    @discardableResult
    static func setDontFragment(_ fd: Int32) -> Bool {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutableBytes(of: &storage) { raw in
            getsockname(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length) == 0
        }
        guard named else { return false }
        if Int32(storage.ss_family) == AF_INET6 {
            var one: Int32 = 1
            var probe = Int32(IPV6_PMTUDISC_DO)
            return setsockopt(fd, ipv6OptionLevel, IPV6_DONTFRAG, &one, 4) == 0
                && setsockopt(fd, ipv6OptionLevel, IPV6_MTU_DISCOVER, &probe, 4) == 0
        }
        var discover = Int32(IP_PMTUDISC_DO)
        return setsockopt(fd, Int32(IPPROTO_IP), IP_MTU_DISCOVER, &discover, 4) == 0
    }
}
