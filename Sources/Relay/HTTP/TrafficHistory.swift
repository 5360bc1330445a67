import RelayCore

/// The relayed byte and packet totals sampled once a second on the main thread, for the status
/// page's rates (docs/admin.md): bits per second over the last few seconds, without asking
/// Prometheus.
public struct TrafficHistory: Sendable {
    struct Sample: Sendable {
        var time: Double
        var traffic: TrafficCounters
    }

    private var samples: [Sample] = []
    /// Seconds the rates average over.
    public static let window = 5.0

    public init() {}

    /// Adds the totals at monotonic `time`, keeping a little more than `window` seconds.
    public mutating func record(_ traffic: TrafficCounters, at time: Double) {
        samples.append(Sample(time: time, traffic: traffic))
        while let first = samples.first, time - first.time > Self.window + 1.5 { samples.removeFirst() }
    }

    /// Bytes and packets per second in each direction between the oldest sample of the window
    /// and the newest; zeros until two samples exist.
    public func rates() -> (bytesToPeer: Double, bytesToClient: Double, packetsToPeer: Double, packetsToClient: Double) {
        guard let newest = samples.last,
            let oldest = samples.first(where: { newest.time - $0.time <= Self.window + 0.5 }),
            newest.time > oldest.time
        else { return (0, 0, 0, 0) }
        let dt = newest.time - oldest.time
        let d = newest.traffic - oldest.traffic
        return (
            Double(d.bytesToPeer) / dt, Double(d.bytesToClient) / dt, Double(d.packetsToPeer) / dt,
            Double(d.packetsToClient) / dt
        )
    }
}
