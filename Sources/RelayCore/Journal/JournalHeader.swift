import StunCodec

/// The 30-byte header (docs/state-journal.md, "Header"): magic, version, boot id, CRC-32.
enum JournalHeader {
    static func encode(bootID: BootID) -> [UInt8] {
        var out = JournalOutput()
        out.bytes = JournalFormat.magic
        out.u16(JournalFormat.version)
        out.u64(bootID.high)
        out.u64(bootID.low)
        out.u32(out.bytes.withUnsafeBytes { CRC32.checksum($0) })
        return out.bytes
    }

    /// Checks the header at the start of `journal`: its magic, then its version (before anything
    /// else of it is read, since another version may lay the rest out otherwise), its CRC-32,
    /// and last the boot it was written in.
    static func check(_ journal: UnsafeRawBufferPointer, bootID: BootID) throws(JournalHeaderError) {
        guard journal.count >= JournalFormat.headerBytes else {
            // A header cut short that does not even begin as one is not a journal at all.
            let start = UnsafeRawBufferPointer(rebasing: journal[0..<min(journal.count, JournalFormat.magic.count)])
            throw start.elementsEqual(JournalFormat.magic.prefix(start.count)) ? .truncated : .badMagic
        }
        let header = UnsafeRawBufferPointer(rebasing: journal[0..<JournalFormat.headerBytes])
        /// The big-endian integer in header bytes `range`.
        func number(_ range: Range<Int>) -> UInt64 { header[range].reduce(0) { $0 << 8 | UInt64($1) } }
        guard header[0..<8].elementsEqual(JournalFormat.magic) else { throw .badMagic }
        let version = UInt16(number(8..<10))
        guard version == JournalFormat.version else { throw .unsupportedVersion(version) }
        let crc = CRC32.checksum(UnsafeRawBufferPointer(rebasing: header[0..<26]))
        guard UInt32(number(26..<30)) == crc else { throw .badChecksum }
        guard BootID(high: number(10..<18), low: number(18..<26)) == bootID else { throw .otherBoot }
    }
}
