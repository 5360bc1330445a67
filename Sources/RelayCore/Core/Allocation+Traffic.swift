/// An allocation's traffic figures as the admin API and the session summary give them.
extension Allocation {
    /// What it relayed so far: its datagrams and messages (RFC 8656 §11, §12), and for a TCP
    /// allocation the bytes its pipes carried on any loop thread (RFC 6062 §5.5).
    public var relayedTraffic: TrafficCounters {
        guard let tcpRelay else { return traffic }
        return traffic + tcpRelay.piped.current
    }

    /// The final figures when the allocation ends: its pipes' counts are ended first, so no pipe
    /// passes on a byte the summary does not count (`PipedTraffic.end()`).
    func endTraffic() -> TrafficCounters {
        guard let tcpRelay else { return traffic }
        return traffic + tcpRelay.piped.end()
    }
}
