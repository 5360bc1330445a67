import StunCodec

/// The allocation record's payload (docs/state-journal.md, "Allocation record").
extension JournalAllocation {
    /// Flag bits; the others are zero.
    enum Flags {
        static let additional: UInt8 = 0x01
        static let dontFragment: UInt8 = 0x02
        static let mobile: UInt8 = 0x04
        static let integritySHA256: UInt8 = 0x08
        static let all: UInt8 = 0x0F
    }

    /// Bytes of the smallest permission (IPv4) and channel (IPv4 peer) entries.
    static let minPermissionBytes = 1 + 4 + 8
    static let minChannelBytes = 2 + 1 + 4 + 2 + 8

    func encode(writtenAt: Int64, into out: inout JournalOutput) throws(JournalEncodingError) {
        out.u64(sessionID)
        try out.time(writtenAt, field: "written")
        out.u8(fiveTuple.transport.rawValue)
        var flags: UInt8 = 0
        if additional != nil { flags |= Flags.additional }
        if dontFragment { flags |= Flags.dontFragment }
        if mobile { flags |= Flags.mobile }
        if credentials.integritySHA256 { flags |= Flags.integritySHA256 }
        out.u8(flags)
        out.transportAddress(fiveTuple.client)
        out.transportAddress(fiveTuple.server)
        for relay in [main] + (additional.map { [$0] } ?? []) {
            out.transportAddress(relay.address)
            try out.time(relay.expiresAt, field: "relay expiry")
        }
        out.u16(credentials.passwordAlgorithm.algorithm)
        try out.bytes(key, lengthBytes: 1, max: 32, field: "key")
        try out.bytes(username.utf8, lengthBytes: 2, max: JournalFormat.maxUsernameBytes, field: "username")
        try out.bytes(user.utf8, lengthBytes: 2, max: JournalFormat.maxUsernameBytes, field: "user")
        out.u32(transactionID.high)
        out.u64(transactionID.low)
        try out.bytes(
            allocateResponse, lengthBytes: 2, max: JournalFormat.maxAllocateResponseBytes, field: "allocateResponse")
        guard bytesPerSecond >= 0 else { throw .negative("bytesPerSecond") }
        out.u64(UInt64(bytesPerSecond))
        out.u32(moves)
        try out.count(permissions.count, field: "permissions")
        for permission in permissions {
            out.ip(permission.peer)
            try out.time(permission.expiresAt, field: "permission expiry")
        }
        try out.count(channels.count, field: "channels")
        for channel in channels {
            out.u16(channel.number)
            out.transportAddress(channel.peer)
            try out.time(channel.expiresAt, field: "channel expiry")
        }
    }

    /// Reads the payload whole, refusing what no writer writes: a transport other than UDP (or
    /// TCP and TLS, with `bounds.streamClients`), a
    /// key whose length does not fit its password algorithm, a channel number outside
    /// 0x4000–0x4FFF, a peer or channel listed twice, more permissions than `bounds` allow.
    static func decode(_ cursor: inout JournalCursor, bounds: JournalBounds) throws(JournalRefusal) -> (
        allocation: JournalAllocation, writtenAt: Int64
    ) {
        let sessionID = try cursor.u64()
        let writtenAt = try cursor.time()
        guard let transport = TransportProtocol(rawValue: try cursor.u8()) else { throw .malformed }
        guard transport == .udp || (transport.isStream && bounds.streamClients) else {
            throw JournalRefusal(reason: .notUDP)
        }
        let flags = try cursor.u8()
        guard flags & ~Flags.all == 0 else { throw .malformed }
        let client = try cursor.transportAddress()
        let server = try cursor.transportAddress()
        let main = Relay(address: try cursor.transportAddress(), expiresAt: try cursor.time())
        var additional: Relay? = nil
        if flags & Flags.additional != 0 {
            let relay = Relay(address: try cursor.transportAddress(), expiresAt: try cursor.time())
            // A dual allocation's second address is of the other family (RFC 8656 §7.2 step 9).
            guard relay.address.ip.family != main.address.ip.family else { throw .malformed }
            additional = relay
        }
        let credentials = CredentialAlgorithms(
            passwordAlgorithm: try passwordAlgorithm(try cursor.u16()),
            integritySHA256: flags & Flags.integritySHA256 != 0)
        let key = try cursor.bytes(lengthBytes: 1, max: 32)
        // MD5 keys are 16 bytes, or none under `no-auth`; SHA-256 keys 32 (RFC 8489 §9.2.2, §18.5).
        let keyFits = credentials.passwordAlgorithm == .sha256 ? key.count == 32 : key.count == 16 || key.isEmpty
        guard keyFits else { throw .malformed }
        let username = try cursor.string(lengthBytes: 2, max: JournalFormat.maxUsernameBytes)
        let user = try cursor.string(lengthBytes: 2, max: JournalFormat.maxUsernameBytes)
        let transactionID = TransactionID(high: try cursor.u32(), low: try cursor.u64())
        let response = try cursor.bytes(lengthBytes: 2, max: JournalFormat.maxAllocateResponseBytes)
        let bytesPerSecond = try cursor.u64()
        guard bytesPerSecond <= UInt64(Int.max) else { throw .malformed }
        let moves = try cursor.u32()
        let permissions = try decodePermissions(&cursor, bounds: bounds)
        let channels = try decodeChannels(&cursor)
        try cursor.end()
        let allocation = JournalAllocation(
            sessionID: sessionID, fiveTuple: FiveTuple(client: client, server: server, transport: transport),
            main: main,
            additional: additional, username: username, user: user, key: key, credentials: credentials,
            transactionID: transactionID, allocateResponse: response, permissions: permissions, channels: channels,
            dontFragment: flags & Flags.dontFragment != 0, bytesPerSecond: Int(bytesPerSecond),
            mobile: flags & Flags.mobile != 0, moves: moves)
        return (allocation, writtenAt)
    }

    /// MD5 (1) or SHA-256 (2), without parameters: the two a long-term key is derived with.
    private static func passwordAlgorithm(_ number: UInt16) throws(JournalRefusal) -> PasswordAlgorithm {
        switch number {
        case PasswordAlgorithm.md5.algorithm: return .md5
        case PasswordAlgorithm.sha256.algorithm: return .sha256
        default: throw .malformed
        }
    }

    private static func decodePermissions(_ cursor: inout JournalCursor, bounds: JournalBounds) throws(JournalRefusal)
        -> [Permission]
    {
        let count = try cursor.count(max: Int(UInt16.max), minBytes: minPermissionBytes)
        guard count <= bounds.permissionsPerAllocation else { throw JournalRefusal(reason: .tooManyPermissions) }
        var permissions: [Permission] = []
        permissions.reserveCapacity(count)
        var peers = Set<IPAddress>(minimumCapacity: count)
        for _ in 0..<count {
            let permission = Permission(peer: try cursor.ip(), expiresAt: try cursor.time())
            guard peers.insert(permission.peer).inserted else { throw .malformed }
            permissions.append(permission)
        }
        return permissions
    }

    /// Channels: each number and each peer once (RFC 8656 §12: a number names one peer, a peer
    /// has one number).
    private static func decodeChannels(_ cursor: inout JournalCursor) throws(JournalRefusal) -> [Channel] {
        let count = try cursor.count(max: JournalFormat.channelNumbers.count, minBytes: minChannelBytes)
        var channels: [Channel] = []
        channels.reserveCapacity(count)
        var numbers = Set<UInt16>(minimumCapacity: count)
        var peers = Set<TransportAddress>(minimumCapacity: count)
        for _ in 0..<count {
            let channel = Channel(
                number: try cursor.u16(), peer: try cursor.transportAddress(), expiresAt: try cursor.time())
            guard JournalFormat.channelNumbers.contains(channel.number), numbers.insert(channel.number).inserted,
                peers.insert(channel.peer).inserted
            else { throw .malformed }
            channels.append(channel)
        }
        return channels
    }
}
