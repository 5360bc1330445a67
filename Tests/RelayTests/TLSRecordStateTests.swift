import CStreamIO
import Testing

/// A TLS 1.3 session's record state as a live upgrade moves it (docs/live-upgrade.md, "TLS
/// clients"): it reads back as written, a session imported from it seals and opens records its
/// peer agrees with (RFC 8446 §5.3: the keys come from the secrets, the nonces from the
/// sequence numbers), a record cut off before the move is completed after it, and bytes that
/// are not such a state are refused, never trapped on.
@Suite struct TLSRecordStateTests {
    /// A state: format 1, `suite`, the two secrets and sequences, and `cut`.
    static func state(
        suite: UInt16 = 0x1301, secretLength: Int = 32, readSecret: UInt8 = 1, readSequence: UInt64 = 0,
        writeSecret: UInt8 = 2, writeSequence: UInt64 = 0, cut: [UInt8] = []
    ) -> [UInt8] {
        func u64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (56 - 8 * UInt64($0))) } }
        var out: [UInt8] = [1, UInt8(suite >> 8), UInt8(suite & 0xFF), UInt8(secretLength)]
        out += (0..<secretLength).map { UInt8(truncatingIfNeeded: Int(readSecret) &* 31 &+ $0) } + u64(readSequence)
        out += (0..<secretLength).map { UInt8(truncatingIfNeeded: Int(writeSecret) &* 31 &+ $0) } + u64(writeSequence)
        out += [UInt8(cut.count >> 8), UInt8(cut.count & 0xFF)] + cut
        return out
    }

    static func importing(_ bytes: [UInt8]) -> OpaquePointer? {
        bytes.withUnsafeBytes { relayd_tls_records_import($0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count) }
    }

    static func exporting(_ records: OpaquePointer) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: Int(RELAYD_TLS_RECORDS_STATE_MAX))
        let n = out.withUnsafeMutableBytes {
            relayd_tls_records_export(records, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count)
        }
        return n < 0 ? nil : Array(out[..<n])
    }

    /// An output queue, freed by `body`'s end.
    static func withIO<R>(_ body: (UnsafeMutablePointer<relayd_stream_io>) throws -> R) rethrows -> R {
        let io = UnsafeMutablePointer<relayd_stream_io>.allocate(capacity: 1)
        relayd_stream_io_init(io, 1 << 20)
        defer {
            relayd_stream_io_destroy(io)
            io.deallocate()
        }
        return try body(io)
    }

    static func sealed(_ records: OpaquePointer, _ plaintext: [UInt8]) -> [UInt8] {
        withIO { io in
            let ok = plaintext.withUnsafeBytes { relayd_tls_records_seal(records, io, $0.baseAddress, $0.count) }
            guard ok == 0 else { return [] }
            return Array(UnsafeRawBufferPointer(start: io.pointee.output + io.pointee.output_start, count: relayd_stream_io_pending(io)))
        }
    }

    /// What `records` opens from `ciphertext` (one call's worth: nil when it failed, [] when it
    /// needs more).
    static func opened(_ records: OpaquePointer, _ ciphertext: [UInt8]) -> [UInt8]? {
        withIO { io in
            var out = [UInt8](repeating: 0, count: Int(RELAYD_TLS_RECORDS_ROOM))
            return ciphertext.withUnsafeBytes { input -> [UInt8]? in
                io.pointee.input = input.baseAddress?.assumingMemoryBound(to: UInt8.self)
                io.pointee.input_length = input.count
                let n = out.withUnsafeMutableBytes {
                    relayd_tls_records_open(records, io, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count)
                }
                io.pointee.input = nil
                io.pointee.input_length = 0
                return n < 0 ? nil : Array(out[..<n])
            }
        }
    }

    @Test("A state reads back as written, with each suite and with a record cut off at any point")
    func roundTrip() throws {
        let record: [UInt8] = [23, 3, 3, 0, 100] + Array(repeating: 0xAB, count: 40)
        for (suite, length) in [(UInt16(0x1301), 32), (0x1302, 48), (0x1303, 32)] {
            for cut in [0, 1, 3, 5, 6, record.count] {
                let bytes = Self.state(
                    suite: suite, secretLength: length, readSequence: 7, writeSequence: (1 << 24) - 5,
                    cut: Array(record[..<cut]))
                let records = try #require(Self.importing(bytes))
                defer { relayd_tls_records_free(records) }
                #expect(Self.exporting(records) == bytes)
                var read: UInt64 = 0
                var write: UInt64 = 0
                relayd_tls_records_sequences(records, &read, &write)
                #expect(read == 7 && write == (1 << 24) - 5)
            }
        }
    }

    @Test("A session moved mid-record opens what its peer seals, the record's rest included")
    func movedSessionAgreesWithItsPeer() throws {
        // The client's side, as a server-role state with the secrets swapped: it seals with the
        // secret the moving session reads with.
        let peer = try #require(Self.importing(Self.state(readSecret: 2, writeSecret: 1, writeSequence: 41)))
        defer { relayd_tls_records_free(peer) }
        let old = try #require(Self.importing(Self.state(readSequence: 41, writeSequence: 9)))
        let first = Self.sealed(peer, Array("before the upgrade".utf8))
        #expect(Self.opened(old, first) == Array("before the upgrade".utf8))
        // The next record arrives in part before the move, and the rest after it.
        let second = Self.sealed(peer, Array("cut in two by the upgrade".utf8))
        #expect(Self.opened(old, Array(second[..<9])) == [])
        let state = try #require(Self.exporting(old))
        relayd_tls_records_free(old)
        let heir = try #require(Self.importing(state))
        defer { relayd_tls_records_free(heir) }
        #expect(Self.opened(heir, Array(second[9...])) == Array("cut in two by the upgrade".utf8))
        // And the other way: the heir seals at the sequence the old process reached.
        let back = Self.peerReading(writeSequence: 9)
        defer { relayd_tls_records_free(back) }
        #expect(Self.opened(back, Self.sealed(heir, Array("after".utf8))) == Array("after".utf8))
    }

    /// The client's reading side: it opens with the secret the session writes with.
    static func peerReading(writeSequence: UInt64) -> OpaquePointer {
        importing(state(readSecret: 2, readSequence: writeSequence, writeSecret: 1))!
    }

    @Test("Bytes that are not a state are refused")
    func refusals() {
        let good = Self.state(cut: [23, 3, 3, 0, 100, 1, 2])
        var refused: [[UInt8]] = []
        var format = good
        format[0] = 2
        refused.append(format)
        refused.append(Self.state(suite: 0x1304))  // TLS_AES_128_CCM_SHA256: not kept by relayd
        refused.append(Self.state(suite: 0x1302, secretLength: 32))  // SHA-384 has 48-byte secrets
        refused.append(Self.state(secretLength: 0))
        refused.append(good + [0])
        refused.append(Self.state(cut: [22, 3, 3]))  // not a protected record (§5.2)
        refused.append(Self.state(cut: [23, 3, 3, 0x41, 0x01]))  // longer than 2^14 + 256
        refused.append(Self.state(cut: [23, 3, 3, 0, 16]))  // shorter than a tag and a type
        refused.append(Self.state(cut: [23, 3, 3, 0, 17] + Array(repeating: 0, count: 17)))  // whole: not cut
        for prefix in 0..<good.count { refused.append(Array(good[..<prefix])) }
        for bytes in refused {
            let records = Self.importing(bytes)
            #expect(records == nil, "\(bytes.prefix(8))")
            relayd_tls_records_free(records)
        }
        let records = Self.importing(good)
        #expect(records != nil)
        relayd_tls_records_free(records)
    }
}
