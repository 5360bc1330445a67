/// The tables every loop thread of the node shares, each a thread-safe object behind a small
/// API (docs/architecture.md, "What is shared between loops, and how"). A core gets them when
/// it is made and keeps them: a reload changes the configuration, never these.
public struct NodeTables: Sendable {
    /// Whether an Allocate may take a share of the node: quotas, `bps-capacity`, blocks and the
    /// cluster (docs/architecture.md, "Admission").
    public let ledger: any AdmissionLedger
    /// The relay ports of every relay address: a 508 means the node has no free port of the
    /// family, not that this loop's share ran out.
    public let ports: RelayPortPool
    /// UDP allocations of every loop by relayed address, for the cross-loop short-circuit.
    public let directory: RelayedAddressDirectory
    /// EVEN-PORT reservations (RFC 8656 §7.2, §18.10).
    public let reservations: ReservationTable
    /// Mobility tickets' keys and which loop holds each mobile allocation (docs/mobility.md).
    public let mobility: MobilityTickets
    /// The peer connections of TCP allocations (RFC 6062): a ConnectionBind may reach any of
    /// them (docs/tcp-relay.md).
    public let tcpConnections: TCPConnectionTable

    public init(
        ledger: any AdmissionLedger, ports: RelayPortPool, directory: RelayedAddressDirectory,
        reservations: ReservationTable, mobility: MobilityTickets, tcpConnections: TCPConnectionTable
    ) {
        self.ledger = ledger
        self.ports = ports
        self.directory = directory
        self.reservations = reservations
        self.mobility = mobility
        self.tcpConnections = tcpConnections
    }
}
