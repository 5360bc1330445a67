import Logging
import StunCodec

/// The settings the protocol state machine reads: a narrow value the I/O layer derives from the
/// configuration (`CoreSettings(configuration:)` in the `Relay` target), so the core never sees
/// file paths, listeners, TLS or HTTP settings (docs/architecture.md).
public struct CoreSettings: Sendable, Equatable {
    /// The relay port range (`min-port`...`max-port`, RFC 8656 §7.2).
    public var minPort: UInt16 = 49152
    public var maxPort: UInt16 = 65535
    /// Longest allocation lifetime a client may ask for (`max-allocate-lifetime`, RFC 8656 §7.2).
    public var maxAllocateLifetime = 3600
    /// Channel binding lifetime (`channel-lifetime`; RFC 8656 §12 fixes 600 s).
    public var channelLifetime = 600
    /// Permission lifetime (`permission-lifetime`; RFC 8656 §9 fixes 300 s).
    public var permissionLifetime = 300
    /// Per-allocation permission limit (`max-permissions-per-allocation`).
    public var maxPermissionsPerAllocation = 32
    /// Per-allocation bandwidth in bytes per second each way (`max-bps`; 0: unlimited).
    public var maxBPS = 0
    /// No long-term credentials required (`no-auth`).
    public var noAuth = false
    /// Binding only (`stun-only`) or TURN only (`no-stun`).
    public var stunOnly = false
    public var noStun = false
    /// NAT behaviour discovery on Binding (RFC 5780); effective only where this loop listens on
    /// two IPs of the client's family and two ports (docs/nat-discovery.md).
    public var rfc5780 = false
    /// TCP allocations (RFC 6062): REQUESTED-TRANSPORT 6 over TCP or TLS; off with `no-tcp-relay`.
    public var tcpRelay = true
    /// Peer connections one TCP allocation may have at once, pending or piped (`max-tcp-relay-connections`).
    public var maxTCPConnectionsPerAllocation = 16
    /// Answer RFC 3489 Binding requests (no magic cookie).
    public var rfc3489Compatibility = false
    /// MAPPED-ADDRESS in every Binding response.
    public var stunBackwardCompatibility = false
    /// The password algorithms offered, in order of preference (`password-algorithms`, RFC 8489
    /// §9.2.4, §18.5): listed in PASSWORD-ALGORITHMS and announced in the nonce cookie unless
    /// the list is MD5 alone, which is RFC 5389's long-term mechanism and nothing more.
    public var passwordAlgorithms: [PasswordAlgorithm] = [.sha256, .md5]
    /// FINGERPRINT on every response (`fingerprint`, RFC 8489 §14.7), else only when the request had one.
    public var fingerprint = false
    /// Mobility (RFC 8016): MOBILITY-TICKET on Allocate is granted (UDP clients), else 405.
    public var mobility = true
    /// Users come from a user database: an Allocate of a user its in-memory view lacks waits
    /// for a lookup (docs/userdb.md).
    public var lookUpUnknownUsers = false
    /// SOFTWARE on responses (RFC 8489 §14.14), nil to leave it out.
    public var softwareAttribute: String?
    /// ALTERNATE-SERVER offered while draining (RFC 8489 §10).
    public var alternateServers: [TransportAddress] = []
    /// The core logger's level.
    public var logLevel: Logger.Level = .info

    public init() {}

    /// The defaults, written once here: the configuration's fields and its keys' bare values
    /// take them from this value.
    public static let defaults = CoreSettings()

    /// Whether the server announces and lists password algorithms (RFC 8489 §9.2.4).
    public var offersPasswordAlgorithms: Bool { passwordAlgorithms != [.md5] }

    /// The relay port range as a closed range.
    public var relayPorts: ClosedRange<UInt16> { minPort...maxPort }
}
