import StunCodec

/// One relayed address a granted Allocate is opening (RFC 8656 §7.2 step 10; RFC 6156 §4 for
/// its family): the search for a free port on the relay addresses of its family, and where its
/// socket stands. The search resumes where it stopped when a port turns out to be in use.
struct RelaySlot {
    enum State {
        /// An `openRelaySocket` command for this address is out; `pair` when EVEN-PORT's R bit
        /// also holds the successor port (RFC 8656 §18.10).
        case opening(TransportAddress, pair: Bool)
        case opened(TransportAddress, RelaySocket)
        case failed
    }

    let family: IPAddress.Family
    let evenPort: EvenPort?
    let tcp: Bool
    /// The port a RESERVATION-TOKEN holds (RFC 8656 §7.2 step 5): the only one tried.
    let reserved: TransportAddress?
    /// The relay addresses of the family, searched round robin from `start`.
    let candidates: [IPAddress]
    let start: Int
    /// The candidate searched now (offset from `start`), and the ports tried on it.
    var attempt = 0
    var tries = 0
    var state = State.failed

    var settled: Bool {
        if case .opening = state { return false }
        return true
    }

    var opened: (TransportAddress, RelaySocket)? {
        if case .opened(let address, let socket) = state { return (address, socket) }
        return nil
    }
}

/// A granted Allocate whose relay sockets are being opened: it waits for each slot's answer,
/// then the allocation is created (or refused), and the lease goes with it.
struct RelayOpening {
    var request: AllocateRequest
    let lease: AdmissionLease
    var slots: [RelaySlot]
    /// Its connection closed, or an allocation of its 5-tuple appeared, while it waited: what
    /// opens is closed again and the lease goes back.
    var cancelled = false

    var settled: Bool { slots.allSatisfy(\.settled) }
}

/// The granted Allocates of one loop waiting for their relay sockets, by serial and by 5-tuple.
/// An `openRelaySocket` command's id is the serial and the slot (`id(serial:slot:)`).
struct RelayOpenings {
    private var bySerial: [UInt64: RelayOpening] = [:]
    private var byFiveTuple: [FiveTuple: UInt64] = [:]
    private var serial: UInt64 = 0

    var count: Int { bySerial.count }

    mutating func nextSerial() -> UInt64 {
        serial &+= 1
        return serial & (UInt64.max >> 1)
    }

    static func id(serial: UInt64, slot: Int) -> UInt64 { serial << 1 | UInt64(slot & 1) }
    static func serial(of id: UInt64) -> UInt64 { id >> 1 }
    static func slot(of id: UInt64) -> Int { Int(id & 1) }

    /// The 5-tuples whose Allocates wait for sockets.
    var fiveTuples: [FiveTuple] { Array(byFiveTuple.keys) }

    /// Whether an Allocate of `fiveTuple` waits for its sockets (a retransmission is dropped).
    func contains(_ fiveTuple: FiveTuple) -> Bool { byFiveTuple[fiveTuple] != nil }

    mutating func hold(_ opening: RelayOpening, serial: UInt64) {
        bySerial[serial] = opening
        byFiveTuple[opening.request.origin.fiveTuple] = serial
    }

    mutating func take(_ serial: UInt64) -> RelayOpening? {
        guard let opening = bySerial.removeValue(forKey: serial) else { return nil }
        let fiveTuple = opening.request.origin.fiveTuple
        if byFiveTuple[fiveTuple] == serial { byFiveTuple[fiveTuple] = nil }
        return opening
    }

    /// `fiveTuple`'s connection closed: its opening, if any, ends when its answers are in.
    mutating func cancel(_ fiveTuple: FiveTuple) {
        guard let serial = byFiveTuple.removeValue(forKey: fiveTuple) else { return }
        bySerial[serial]?.cancelled = true
    }
}
