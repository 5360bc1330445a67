/// Per-flow sequence bookkeeping without allocation per packet: one bitmap per flow (sized
/// up front for the expected sequence range) for duplicates, the highest sequence seen for
/// reordering.
final class FlowTracker {
    let flows: Int
    let wordsPerFlow: Int
    private let bits: UnsafeMutablePointer<UInt64>
    private let highest: UnsafeMutablePointer<UInt64>
    private let seenAny: UnsafeMutablePointer<Bool>
    var unique: UInt64 = 0
    var duplicates: UInt64 = 0
    var reordered: UInt64 = 0
    /// Sequences beyond the bitmap (counted as unique without duplicate detection).
    var untracked: UInt64 = 0

    init(flows: Int, maxSequence: Int) {
        self.flows = max(flows, 1)
        wordsPerFlow = maxSequence / 64 + 1
        bits = .allocate(capacity: self.flows * wordsPerFlow)
        bits.initialize(repeating: 0, count: self.flows * wordsPerFlow)
        highest = .allocate(capacity: self.flows)
        highest.initialize(repeating: 0, count: self.flows)
        seenAny = .allocate(capacity: self.flows)
        seenAny.initialize(repeating: false, count: self.flows)
    }

    deinit {
        bits.deallocate()
        highest.deallocate()
        seenAny.deallocate()
    }

    /// Records `sequence` of `flow`; returns false for a duplicate.
    @inline(__always)
    func record(flow: Int, sequence: UInt64) -> Bool {
        if seenAny[flow] && sequence < highest[flow] {
            reordered &+= 1
        } else {
            highest[flow] = sequence
            seenAny[flow] = true
        }
        let word = Int(sequence >> 6)
        guard word < wordsPerFlow else {
            untracked &+= 1
            unique &+= 1
            return true
        }
        let p = bits + flow * wordsPerFlow + word
        let mask = UInt64(1) << (sequence & 63)
        if p.pointee & mask != 0 {
            duplicates &+= 1
            // A duplicate is not a reordering: undo the count taken above.
            if sequence < highest[flow] { reordered &-= 1 }
            return false
        }
        p.pointee |= mask
        unique &+= 1
        return true
    }
}
