import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// What the reader does not trust though the frames are whole (docs/state-journal.md, "What is
/// trusted"): lifetimes it cannot check against RFC 8656's, records from after its `now`, a
/// transport other than UDP, fields out of range. Each is dropped and counted.
@Suite struct JournalTrustTests {
    typealias F = JournalFixture

    static func journal(_ records: [JournalRecord], written: Int64 = F.written) throws -> [UInt8] {
        var journal = JournalWriter.header(bootID: F.boot)
        for record in records { try JournalWriter.append(record, now: written, to: &journal) }
        return journal
    }

    @Test("Run-out and overlong lifetimes are dropped and counted: allocations, permissions, channels, reservations")
    func lifetimes() throws {
        var expired = F.plain(1)
        expired.main.expiresAt = F.now
        var overlong = F.plain(2)
        overlong.main.expiresAt = F.written + 3601
        var additionalExpired = F.dual(3)
        additionalExpired.additional?.expiresAt = F.now - 1
        var mixed = F.dual(4)
        mixed.permissions[0].expiresAt = F.now - 5
        mixed.permissions[1].expiresAt = F.written + 301
        mixed.channels[0].expiresAt = F.now
        mixed.channels[1].expiresAt = F.written + 601
        let records: [JournalRecord] = [
            .allocation(expired), .allocation(overlong), .allocation(additionalExpired), .allocation(mixed),
            .reservation(token: 1, .init(address: .literal("10.0.0.5:50005"), expiresAt: F.now - 1)),
            .reservation(token: 2, .init(address: .literal("10.0.0.5:50007"), expiresAt: F.written + 31)),
            .reservation(token: 3, F.reservation()),
        ]
        let recovery = try F.read(try Self.journal(records))
        #expect(Set(recovery.state.allocations.keys) == [4])
        #expect(recovery.state.allocations[4]?.permissions.isEmpty == true)
        #expect(recovery.state.allocations[4]?.channels.isEmpty == true)
        #expect(Set(recovery.state.reservations.keys) == [3])
        let expected: [JournalDropReason: Int] = [
            .allocationExpired: 2, .allocationLifetimeTooLong: 1, .permissionExpired: 1,
            .permissionLifetimeTooLong: 1, .channelExpired: 1, .channelLifetimeTooLong: 1, .reservationExpired: 1,
            .reservationLifetimeTooLong: 1,
        ]
        #expect(recovery.drops == expected)
        // Under a longer max-allocate-lifetime the overlong allocation is within bounds.
        let longer = try F.read(try Self.journal(records), bounds: JournalBounds(allocationLifetime: 7200))
        #expect(longer.state.allocations[2] != nil)
    }

    @Test("Bounds come from the core's settings")
    func boundsFromSettings() {
        var settings = CoreSettings()
        settings.maxAllocateLifetime = 1800
        settings.maxPermissionsPerAllocation = 8
        let bounds = JournalBounds(settings: settings)
        #expect(bounds == JournalBounds(allocationLifetime: 1800, permissionsPerAllocation: 8))
    }

    @Test("A record written after the reader's now is not trusted")
    func writtenAfterNow() throws {
        let recovery = try F.read(try Self.journal([.allocation(F.plain())], written: F.now + 1))
        #expect(recovery.state.allocations.isEmpty)
        #expect(recovery.drops == [.writtenAfterNow: 1])
    }

    @Test("A non-UDP allocation is refused: by the writer, and by the reader when a record says so")
    func notUDP() throws {
        var tcp = F.plain()
        tcp.fiveTuple.transport = .tcp
        var journal = try Self.journal([])
        #expect(throws: JournalEncodingError.unreadable(.notUDP)) {
            try JournalWriter.append(.allocation(tcp), now: F.written, to: &journal)
        }
        #expect(journal == JournalWriter.header(bootID: F.boot), "nothing was appended")
        // A UDP record, then the same session's record with its transport byte (payload byte 16) TLS.
        let udp = try Self.journal([.allocation(F.dual()), .allocation(F.dual())])
        let second = JournalFormat.headerBytes + (udp.count - JournalFormat.headerBytes) / 2
        let tls = F.rewriteFrame(udp, at: second) { $0[5 + 16] = TransportProtocol.tls.rawValue }
        let recovery = try F.read(tls)
        #expect(recovery.drops == [.notUDP: 1])
        // The refused record was written to replace the first: that one is stale, and goes too.
        #expect(recovery.state.allocations.isEmpty)
        #expect(recovery.tail == nil && recovery.records == 2)
    }

    @Test("An unknown record type with a good CRC is skipped, and the records after it are read")
    func unknownType() throws {
        let journal = try Self.journal([.allocationEnded(sessionID: 5), .allocation(F.plain())])
        let skipped = F.rewriteFrame(journal, at: JournalFormat.headerBytes) { $0[0] = 0x7F }
        let recovery = try F.read(skipped)
        #expect(recovery.drops == [.unknownRecordType: 1])
        #expect(Set(recovery.state.allocations.keys) == [0x2222])
    }

    @Test("More permissions than the bounds allow: the allocation is refused")
    func tooManyPermissions() throws {
        let recovery = try F.read(
            try Self.journal([.allocation(F.dual())]), bounds: JournalBounds(permissionsPerAllocation: 1))
        #expect(recovery.state.allocations.isEmpty)
        #expect(recovery.drops == [.tooManyPermissions: 1])
    }

    @Test("Fields out of range are refused by the writer, and by the reader when framed well")
    func malformedFields() throws {
        var badKey = F.plain()
        badKey.key = Array(repeating: 1, count: 20)
        var md5KeyForSHA256 = F.plain()
        md5KeyForSHA256.credentials.passwordAlgorithm = .sha256
        var badChannel = F.dual()
        badChannel.channels[0].number = 0x3FFF
        var twiceTheSamePeer = F.dual()
        twiceTheSamePeer.permissions[1].peer = twiceTheSamePeer.permissions[0].peer
        var sameFamily = F.dual()
        sameFamily.additional?.address = .literal("10.0.0.6:50002")
        var longName = F.plain()
        longName.username = String(repeating: "x", count: 764)
        var negative = F.plain()
        negative.permissions = [.init(peer: .literal("1.2.3.4"), expiresAt: -1)]
        var journal = try Self.journal([])
        for allocation in [badKey, md5KeyForSHA256, badChannel, twiceTheSamePeer, sameFamily] {
            #expect(throws: JournalEncodingError.unreadable(.malformed)) {
                try JournalWriter.append(.allocation(allocation), now: F.written, to: &journal)
            }
        }
        #expect(throws: JournalEncodingError.tooLong("username")) {
            try JournalWriter.append(.allocation(longName), now: F.written, to: &journal)
        }
        #expect(throws: JournalEncodingError.negative("permission expiry")) {
            try JournalWriter.append(.allocation(negative), now: F.written, to: &journal)
        }
        #expect(throws: JournalEncodingError.negative("written")) {
            try JournalWriter.append(.allocation(F.plain()), now: -1, to: &journal)
        }
        #expect(throws: JournalEncodingError.unreadable(.malformed)) {
            try JournalWriter.append(
                .keys([JournalKey(name: "a", bytes: []), JournalKey(name: "a", bytes: [])]), now: F.written,
                to: &journal)
        }
        #expect(journal == JournalWriter.header(bootID: F.boot))
        // The same checks in the reader: a channel number patched to 0x3FFF in a well-framed record.
        // The dual allocation's last bytes: channel 0x4000 (IPv4 peer, 17 bytes), channel 0x4FFF
        // (IPv6 peer, 29 bytes), the CRC.
        let good = try Self.journal([.allocation(F.plain(1)), .allocation(F.dual())])
        let frame = Self.lastFrameOffset(good)
        let channel = good.count - 4 - 29 - 17 - frame
        #expect(good[frame + channel] == 0x40 && good[frame + channel + 1] == 0x00)
        let patched = F.rewriteFrame(good, at: frame) { bytes in
            bytes[channel] = 0x3F
            bytes[channel + 1] = 0xFF
        }
        let recovery = try F.read(patched)
        #expect(recovery.drops == [.malformed: 1])
        #expect(Set(recovery.state.allocations.keys) == [1])
    }

    /// Where the last frame of a journal starts: its frames walked by their lengths.
    static func lastFrameOffset(_ journal: [UInt8]) -> Int {
        var offset = JournalFormat.headerBytes
        var last = offset
        while offset < journal.count {
            last = offset
            offset += 9 + journal[offset + 1..<offset + 5].reduce(0) { $0 << 8 | Int($1) }
        }
        return last
    }
}
