import StunCodec

extension RelayConfiguration {
    /// The addresses the file leaves to the machine, filled in: with no `listening-ip`, every
    /// address of the host's interfaces; with no `relay-ip`, the listening addresses that are
    /// not wildcards. The daemon, its reload and `check-config` all resolve them here.
    public func resolvingAddresses(interfaces: [IPAddress]) -> RelayConfiguration {
        var c = self
        if c.listeningIPs.isEmpty { c.listeningIPs = interfaces }
        if c.relayIPs.isEmpty { c.relayIPs = c.listeningIPs.filter { !$0.isWildcard } }
        return c
    }
}
