import Relay

/// Settings that parse but that this build does not enforce yet: named at startup so that an
/// operator never mistakes them for active (shared/design/COMPAT.md: never silently ignored).
enum UnenforcedSettings {
    static func warnings(for c: RelayConfiguration) -> [String] {
        let defaults = RelayConfiguration()
        var notes: [String] = []
        if c.maxBPS != defaults.maxBPS { notes.append("max-bps is not enforced yet: allocations are not rate-limited") }
        if c.bpsCapacity != defaults.bpsCapacity { notes.append("bps-capacity is not enforced yet") }
        return notes
    }
}
