/// A xorshift generator for the core's unpredictable-enough numbers (Data indication transaction
/// IDs, session ids, reservation tokens, where a port search starts): cheap, and seeded by the
/// caller, so a test can replay a run; the server seeds it from the system.
struct FastRandom {
    var state: UInt64

    /// `seed` 0 (xorshift's one fixed point) is replaced by a fixed non-zero value.
    init(seed: UInt64) { state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed }

    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}
