import StunCodec

/// The allocations of one loop thread by their client's 5-tuple (RFC 8656 §2): the index every
/// request and every ChannelData from a client is looked up in.
///
/// Open addressing with linear probing, at most half full. A bucket holds the allocation's
/// reference and a 32-bit tag of its key's hash, so a probe compares tags before it reads an
/// allocation; the key itself is the allocation's (`origin.fiveTuple`). A Swift Dictionary kept
/// the 48-byte 5-tuple beside each reference, in a table at most three quarters full: about
/// 130 B an allocation at 7,500 a loop, against about 26 B here (docs/benchmark.md, "Node
/// capacity"). Since the key is read from the allocation, an allocation is removed before its
/// 5-tuple changes (`AllocationTable.move`). Removal shifts the rest of a cluster back, so no
/// tombstones build up, and the table halves when it is less than an eighth full.
final class FiveTupleIndex {
    @exclusivity(unchecked) private var tags: [UInt32]
    @exclusivity(unchecked) private var entries: [Allocation?]
    private var mask: Int
    private(set) var count = 0

    static let minimumBuckets = 16

    init() {
        tags = Array(repeating: 0, count: Self.minimumBuckets)
        entries = Array(repeating: nil, count: Self.minimumBuckets)
        mask = Self.minimumBuckets - 1
    }

    /// Buckets in the table (a power of two).
    var capacity: Int { tags.count }

    /// A nonzero tag from the hash's upper half (the lower half picks the bucket).
    @inline(__always)
    private static func tag(_ hash: Int) -> UInt32 { UInt32(truncatingIfNeeded: UInt(bitPattern: hash) >> 32) | 1 }

    /// The allocation of `key`.
    @inline(__always)
    subscript(key: FiveTuple) -> Allocation? {
        let hash = key.hashValue
        let tag = Self.tag(hash)
        var i = hash & mask
        while true {
            let t = tags[i]
            if t == 0 { return nil }
            if t == tag, let allocation = entries[i], allocation.origin.fiveTuple == key { return allocation }
            i = (i &+ 1) & mask
        }
    }

    /// Lists `allocation` under its 5-tuple, which must be free.
    func insert(_ allocation: Allocation) {
        if (count + 1) * 2 > tags.count { resize(to: tags.count * 2) }
        place(allocation, hash: allocation.origin.fiveTuple.hashValue)
        count += 1
    }

    /// Forgets `allocation`, listed under its current 5-tuple; nothing when it is not listed.
    func remove(_ allocation: Allocation) {
        var i = allocation.origin.fiveTuple.hashValue & mask
        while entries[i] !== allocation {
            if tags[i] == 0 { return }
            i = (i &+ 1) & mask
        }
        // Each later entry of the cluster moves into the hole unless its home bucket lies
        // (cyclically) after the hole and up to where it is.
        var hole = i
        var j = i
        while true {
            j = (j &+ 1) & mask
            guard tags[j] != 0, let entry = entries[j] else { break }
            let home = entry.origin.fiveTuple.hashValue & mask
            let stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j)
            if !stays {
                tags[hole] = tags[j]
                entries[hole] = entry
                hole = j
            }
        }
        tags[hole] = 0
        entries[hole] = nil
        count -= 1
        if count * 8 < tags.count && tags.count > Self.minimumBuckets { resize(to: tags.count / 2) }
    }

    /// Every allocation listed, in no particular order: a snapshot, which the caller may walk
    /// while it changes the index.
    var all: AllocationList { AllocationList(entries: entries, count: count) }

    private func place(_ allocation: Allocation, hash: Int) {
        var i = hash & mask
        while tags[i] != 0 { i = (i &+ 1) & mask }
        tags[i] = Self.tag(hash)
        entries[i] = allocation
    }

    private func resize(to buckets: Int) {
        let old = entries
        tags = Array(repeating: 0, count: buckets)
        entries = Array(repeating: nil, count: buckets)
        mask = buckets - 1
        for case let allocation? in old { place(allocation, hash: allocation.origin.fiveTuple.hashValue) }
    }
}

/// A loop's allocations, as `FiveTupleIndex.all` took them.
public struct AllocationList: Sequence {
    fileprivate let entries: [Allocation?]
    /// How many there are.
    public let count: Int

    public var underestimatedCount: Int { count }

    public struct Iterator: IteratorProtocol {
        fileprivate var base: IndexingIterator<[Allocation?]>

        public mutating func next() -> Allocation? {
            while let slot = base.next() { if let allocation = slot { return allocation } }
            return nil
        }
    }

    public func makeIterator() -> Iterator { Iterator(base: entries.makeIterator()) }
}
