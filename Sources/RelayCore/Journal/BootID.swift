/// Which boot of the machine a journal was written in: the 16 bytes of
/// /proc/sys/kernel/random/boot_id, new at every boot. `CLOCK_BOOTTIME` starts again at zero
/// with each boot, and sockets do not survive one, so a journal of another boot is no state to
/// restore (`JournalHeaderError.otherBoot`).
public struct BootID: Hashable, Sendable {
    /// Bytes 0–7 and 8–15, big-endian.
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Exactly 16 bytes, else nil.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (i, byte) in bytes.enumerated() {
            if i < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
        }
        self.init(high: high, low: low)
    }

    /// The text of /proc/sys/kernel/random/boot_id: 32 hex digits in the 8-4-4-4-12 groups of a
    /// UUID, a trailing newline allowed. Anything else is nil.
    public init?(text: some StringProtocol) {
        var utf8 = Array(text.utf8)
        if utf8.last == 0x0A { utf8.removeLast() }
        guard utf8.count == 36 else { return nil }
        var bytes: [UInt8] = []
        var pending: UInt8? = nil
        for (i, c) in utf8.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                guard c == 0x2D else { return nil }
                continue
            }
            let nibble: UInt8
            switch c {
            case 0x30...0x39: nibble = c - 0x30
            case 0x61...0x66: nibble = c - 0x61 + 10
            case 0x41...0x46: nibble = c - 0x41 + 10
            default: return nil
            }
            if let high = pending {
                bytes.append(high << 4 | nibble)
                pending = nil
            } else {
                pending = nibble
            }
        }
        self.init(bytes: bytes)
    }

    /// The 16 bytes, in order.
    public var bytes: [UInt8] {
        var bytes: [UInt8] = []
        for half in [high, low] {
            for shift in stride(from: 56, through: 0, by: -8) {
                bytes.append(UInt8(truncatingIfNeeded: half >> UInt64(shift)))
            }
        }
        return bytes
    }
}
