import StunCodec

/// What `BehaviourDiscovery` makes of a set of listeners, for tests and `check-config`: the
/// OTHER-ADDRESS a request on `received` would be told, or nil (RFC 5780 §6).
public enum BehaviourDiscoveryProbe {
    public static func other(
        received: TransportAddress, listeners: [(address: TransportAddress, socket: ClientSocket)]
    ) -> TransportAddress? {
        BehaviourDiscovery(received: received, listeners: listeners)?.other
    }
}
