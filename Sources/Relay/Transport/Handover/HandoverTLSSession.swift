import CStreamIO

/// What a TLS client's connection adds to `HandoverStream` in a live upgrade
/// (docs/live-upgrade.md, "TLS clients"): the session's record state, which relayd keeps itself
/// after a TLS 1.3 handshake (`relayd_tls_records_export`: per direction the traffic secret and
/// sequence number, RFC 8446 §5.3, §7.3, and a record cut off so far), and the tenant its server
/// name chose (docs/tenants.md), by name: indexes are the process's own.
struct HandoverTLSSession: Sendable, Equatable {
    /// Holds the traffic secrets: wiped when the last copy of this value is gone.
    var records: SecretBytes
    /// Empty when the server name chose no tenant.
    var tenant: String

    /// A tenant's name is a configuration key's value: 255 bytes at most here.
    static let maxTenantBytes = 255
    static let maxRecordBytes = Int(RELAYD_TLS_RECORDS_STATE_MAX)

    /// The tenant's name is at most `maxTenantBytes` long (the sender checks).
    func encode(into out: inout HandoverOutput) {
        let name = Array(tenant.utf8.prefix(Self.maxTenantBytes))
        out.u8(UInt8(name.count))
        out.bytes += name
        out.u32(UInt32(records.count))
        records.withUnsafeBytes { out.bytes.append(contentsOf: $0) }
    }

    /// Reads one; `room` is what the stream's other bytes left of `HandoverStream.maxBytes`.
    init(decoding input: inout HandoverInput, room: Int) throws(HandoverMessage.DecodingError) {
        let length = Int(try input.u8())
        tenant = String(decoding: try input.bytes(length), as: UTF8.self)
        records = try input.countedSecret(max: min(Self.maxRecordBytes, room))
        guard !records.isEmpty else { throw .init(description: "a TLS stream without its records") }
    }

    init(records: SecretBytes, tenant: String) {
        self.records = records
        self.tenant = tenant
    }
}
