/// A value that does not fit its key; `expected` completes "expected …" in the message.
struct ConfigValueError: Error, Hashable, Sendable {
    var expected: String
    /// True when no value was given at all.
    var missing: Bool

    init(expected: String, missing: Bool = false) {
        self.expected = expected
        self.missing = missing
    }
}
