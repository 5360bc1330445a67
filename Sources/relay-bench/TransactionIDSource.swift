import StunCodec

/// Transaction IDs for the load generator: SplitMix64 seeded once from the system generator.
/// RFC 8489 §5 asks for IDs an attacker cannot guess; that matters for a client on a real
/// network, not for a benchmark on loopback, where the IDs only have to be distinct.
struct TransactionIDSource {
    private var state: UInt64

    init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    private mutating func next64() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func next() -> TransactionID {
        TransactionID(high: UInt32(truncatingIfNeeded: next64()), low: next64())
    }
}
