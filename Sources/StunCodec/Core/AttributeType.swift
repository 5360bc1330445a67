/// A STUN attribute type (RFC 8489 §14, §18.3). An open set: unknown types survive a round trip.
public struct AttributeType: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt16

    @inlinable
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Types 0x0000–0x7FFF are comprehension-required (RFC 8489 §14).
    @inlinable
    public var isComprehensionRequired: Bool { rawValue < 0x8000 }

    // RFC 8489 §18.3.1 (comprehension-required)
    public static let mappedAddress = AttributeType(rawValue: 0x0001)
    public static let username = AttributeType(rawValue: 0x0006)
    public static let messageIntegrity = AttributeType(rawValue: 0x0008)
    public static let errorCode = AttributeType(rawValue: 0x0009)
    public static let unknownAttributes = AttributeType(rawValue: 0x000A)
    public static let realm = AttributeType(rawValue: 0x0014)
    public static let nonce = AttributeType(rawValue: 0x0015)
    public static let messageIntegritySHA256 = AttributeType(rawValue: 0x001C)
    public static let passwordAlgorithm = AttributeType(rawValue: 0x001D)
    public static let userhash = AttributeType(rawValue: 0x001E)
    public static let xorMappedAddress = AttributeType(rawValue: 0x0020)
    // RFC 8489 §18.3.2 (comprehension-optional)
    public static let passwordAlgorithms = AttributeType(rawValue: 0x8002)
    public static let alternateDomain = AttributeType(rawValue: 0x8003)
    public static let software = AttributeType(rawValue: 0x8022)
    public static let alternateServer = AttributeType(rawValue: 0x8023)
    public static let fingerprint = AttributeType(rawValue: 0x8028)
    // RFC 8656 §18
    public static let channelNumber = AttributeType(rawValue: 0x000C)
    public static let lifetime = AttributeType(rawValue: 0x000D)
    public static let xorPeerAddress = AttributeType(rawValue: 0x0012)
    public static let data = AttributeType(rawValue: 0x0013)
    public static let xorRelayedAddress = AttributeType(rawValue: 0x0016)
    public static let requestedAddressFamily = AttributeType(rawValue: 0x0017)
    public static let evenPort = AttributeType(rawValue: 0x0018)
    public static let requestedTransport = AttributeType(rawValue: 0x0019)
    public static let dontFragment = AttributeType(rawValue: 0x001A)
    public static let reservationToken = AttributeType(rawValue: 0x0022)
    public static let additionalAddressFamily = AttributeType(rawValue: 0x8000)
    public static let addressErrorCode = AttributeType(rawValue: 0x8001)
    /// The code points coturn and its `turnutils_uclient -Z` still use for ADDITIONAL-ADDRESS-
    /// FAMILY and ADDRESS-ERROR-CODE, from the drafts before RFC 8656 (same value formats).
    public static let additionalAddressFamilyDraft = AttributeType(rawValue: 0x8032)
    public static let addressErrorCodeDraft = AttributeType(rawValue: 0x8033)
    public static let icmp = AttributeType(rawValue: 0x8004)
    // RFC 8016 §3.3
    public static let mobilityTicket = AttributeType(rawValue: 0x8030)
    // RFC 6062 §6.2
    public static let connectionID = AttributeType(rawValue: 0x002A)
    // RFC 5780 §7
    public static let changeRequest = AttributeType(rawValue: 0x0003)
    public static let padding = AttributeType(rawValue: 0x0026)
    public static let responsePort = AttributeType(rawValue: 0x0027)
    public static let responseOrigin = AttributeType(rawValue: 0x802B)
    public static let otherAddress = AttributeType(rawValue: 0x802C)
    /// ORIGIN (draft-ietf-tram-stun-origin §3, comprehension-optional): the web origin of the
    /// page that made the request, as browsers once sent it and coturn maps to a realm.
    public static let origin = AttributeType(rawValue: 0x802F)
    // RFC 3489 §11.2 (classic STUN, answered with `rfc3489-compatibility`)
    public static let sourceAddress = AttributeType(rawValue: 0x0004)
    public static let changedAddress = AttributeType(rawValue: 0x0005)
    // RFC 8445 §16.1
    public static let priority = AttributeType(rawValue: 0x0024)
    public static let useCandidate = AttributeType(rawValue: 0x0025)
    public static let iceControlled = AttributeType(rawValue: 0x8029)
    public static let iceControlling = AttributeType(rawValue: 0x802A)
}
