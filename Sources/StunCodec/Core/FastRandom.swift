/// A xorshift generator for unpredictable-enough numbers (the core's Data indication transaction
/// IDs, session ids, reservation tokens, where a port search starts; relay-bench's transaction
/// IDs): cheap, and seeded by the caller, so a test can replay a run; the server seeds it from
/// the system.
public struct FastRandom: Sendable {
    @usableFromInline var state: UInt64

    /// `seed` 0 (xorshift's one fixed point) is replaced by a fixed non-zero value.
    public init(seed: UInt64) { state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed }

    @inlinable
    public mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}
