import COpenSSL
import CStreamIO

/// (k)'s TLS 1.3 session: a client and a server `SSL` of OpenSSL shake hands in memory, each over
/// a `relayd_stream_io` as relayd's connections have, with a throwaway P-256 certificate; then
/// both sides' records are taken over as relayd takes a connection's (docs/tls.md, "After the
/// handshake") and the `SSL` objects are freed. The server sends no session tickets, so the
/// client's side reads no ticket before its first record.
final class TLSRecordsFixture {
    let clientIO = UnsafeMutablePointer<relayd_stream_io>.allocate(capacity: 1)
    let serverIO = UnsafeMutablePointer<relayd_stream_io>.allocate(capacity: 1)
    private(set) var client: OpaquePointer?
    private(set) var server: OpaquePointer?
    /// What one relayed packet carries (a 100-byte ChannelData payload and its header).
    let payload = UnsafeMutableRawBufferPointer.allocate(byteCount: 104, alignment: 8)
    let opened = UnsafeMutablePointer<UInt8>.allocate(capacity: Int(RELAYD_TLS_RECORDS_ROOM))

    init() throws {
        relayd_stream_io_init(clientIO, 1 << 20)
        relayd_stream_io_init(serverIO, 1 << 20)
        for i in 0..<payload.count { payload[i] = UInt8(truncatingIfNeeded: i &* 31) }
        guard let serverContext = SSL_CTX_new(TLS_server_method()), let clientContext = SSL_CTX_new(TLS_client_method())
        else { throw BenchError.invalidFixture("tls: SSL_CTX_new") }
        defer {
            SSL_CTX_free(serverContext)
            SSL_CTX_free(clientContext)
        }
        try Self.useThrowawayCertificate(serverContext)
        SSL_CTX_set_num_tickets(serverContext, 0)
        guard relayd_tls_records_capture(serverContext) == 0, relayd_tls_records_capture(clientContext) == 0 else {
            throw BenchError.invalidFixture("tls: key-log callback")
        }
        guard let serverSSL = SSL_new(serverContext), let clientSSL = SSL_new(clientContext),
            let serverBIO = relayd_stream_io_bio(serverIO), let clientBIO = relayd_stream_io_bio(clientIO)
        else { throw BenchError.invalidFixture("tls: SSL_new") }
        SSL_set_bio(serverSSL, serverBIO, serverBIO)
        SSL_set_bio(clientSSL, clientBIO, clientBIO)
        SSL_set_accept_state(serverSSL)
        SSL_set_connect_state(clientSSL)
        defer {
            SSL_free(serverSSL)
            SSL_free(clientSSL)
        }
        var clientDone = false
        var serverDone = false
        for _ in 0..<8 where !(clientDone && serverDone) {
            if !clientDone { clientDone = SSL_do_handshake(clientSSL) == 1 }
            Self.deliver(from: clientIO, to: serverIO) { if !serverDone { serverDone = SSL_do_handshake(serverSSL) == 1 } }
            Self.deliver(from: serverIO, to: clientIO) { if !clientDone { clientDone = SSL_do_handshake(clientSSL) == 1 } }
        }
        guard clientDone, serverDone else { throw BenchError.invalidFixture("tls: the handshake did not finish") }
        client = relayd_tls_records_new(clientSSL, clientIO, 0)
        server = relayd_tls_records_new(serverSSL, serverIO, 0)
        guard client != nil, server != nil else { throw BenchError.invalidFixture("tls: records not taken") }
    }

    /// Hands what `from` queued to `to` as its input while `body` runs, then drops it.
    private static func deliver(
        from: UnsafeMutablePointer<relayd_stream_io>, to: UnsafeMutablePointer<relayd_stream_io>, _ body: () -> Void
    ) {
        let pending = relayd_stream_io_pending(from)
        if pending > 0 {
            to.pointee.input = UnsafePointer(from.pointee.output + from.pointee.output_start)
            to.pointee.input_length = pending
        }
        body()
        to.pointee.input = nil
        to.pointee.input_length = 0
        from.pointee.output_start = 0
        from.pointee.output_end = 0
    }

    /// A P-256 key and a self-signed certificate for it, valid for a day.
    private static func useThrowawayCertificate(_ context: OpaquePointer) throws {
        guard let keygen = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw BenchError.invalidFixture("tls: EC") }
        defer { EVP_PKEY_CTX_free(keygen) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(keygen) == 1, EVP_PKEY_CTX_set_group_name(keygen, "P-256") == 1,
            EVP_PKEY_generate(keygen, &key) == 1, let key
        else { throw BenchError.invalidFixture("tls: key") }
        defer { EVP_PKEY_free(key) }
        guard let certificate = X509_new() else { throw BenchError.invalidFixture("tls: X509_new") }
        defer { X509_free(certificate) }
        X509_set_version(certificate, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(certificate), 1)
        X509_gmtime_adj(X509_getm_notBefore(certificate), 0)
        X509_gmtime_adj(X509_getm_notAfter(certificate), 86400)
        X509_set_pubkey(certificate, key)
        X509_set_issuer_name(certificate, X509_get_subject_name(certificate))
        guard X509_sign(certificate, key, EVP_sha256()) > 0, SSL_CTX_use_certificate(context, certificate) == 1,
            SSL_CTX_use_PrivateKey(context, key) == 1
        else { throw BenchError.invalidFixture("tls: certificate") }
    }

    /// Checks once, outside timing, that a record each way opens to what was sealed.
    func validate() throws {
        guard sealAndOpen(from: server!, fromIO: serverIO, to: client!, toIO: clientIO) == payload.count,
            memcmp(opened, payload.baseAddress!, payload.count) == 0,
            sealAndOpen(from: client!, fromIO: clientIO, to: server!, toIO: serverIO) == payload.count,
            memcmp(opened, payload.baseAddress!, payload.count) == 0
        else { throw BenchError.invalidFixture("tls: a record did not open to what was sealed") }
        // Where the server's write sequence reaches 2^24 it sends a KeyUpdate and moves its key
        // on (RFC 8446 §5.5); the client's side follows it, and records go on opening.
        let limit: UInt64 = 1 << 24
        relayd_tls_records_set_sequences(server!, 0, limit - 1)
        relayd_tls_records_set_sequences(client!, limit - 1, 0)
        for _ in 0..<3 {
            guard sealAndOpen(from: server!, fromIO: serverIO, to: client!, toIO: clientIO) == payload.count,
                memcmp(opened, payload.baseAddress!, payload.count) == 0
            else { throw BenchError.invalidFixture("tls: records across the write key's update") }
        }
        var read: UInt64 = 0
        var written: UInt64 = 0
        relayd_tls_records_sequences(server!, &read, &written)
        guard written == 2 else { throw BenchError.invalidFixture("tls: no KeyUpdate at 2^24 records (\(written))") }
        relayd_tls_records_sequences(client!, &read, &written)
        guard read == 2 else { throw BenchError.invalidFixture("tls: the client's side did not follow the update") }
    }

    /// One record from `from` to `to`: sealed into `fromIO`'s queue, opened from there; the
    /// plaintext length opened (or a negative RELAYD_TLS_RECORDS_ code).
    @inline(__always)
    func sealAndOpen(
        from: OpaquePointer, fromIO: UnsafeMutablePointer<relayd_stream_io>, to: OpaquePointer,
        toIO: UnsafeMutablePointer<relayd_stream_io>
    ) -> Int {
        guard relayd_tls_records_seal(from, fromIO, payload.baseAddress!, payload.count) == 0 else { return -10 }
        toIO.pointee.input = UnsafePointer(fromIO.pointee.output + fromIO.pointee.output_start)
        toIO.pointee.input_length = relayd_stream_io_pending(fromIO)
        let result = relayd_tls_records_open(to, toIO, opened, Int(RELAYD_TLS_RECORDS_ROOM))
        fromIO.pointee.output_start = 0
        fromIO.pointee.output_end = 0
        return result
    }
}

/// (k) A relayed packet over TLS each way through relayd's own records: the server seals 100
/// bytes as a record and the client's side opens it, then the client seals and the server
/// opens. The queue keeps its memory between records, as a connection's does.
@inline(never)
func tlsRecordsRoundTrip(_ f: TLSRecordsFixture, iterations: Int) -> UInt64 {
    var total: UInt64 = 0
    for _ in 0..<iterations {
        total &+= UInt64(bitPattern: Int64(f.sealAndOpen(from: f.server!, fromIO: f.serverIO, to: f.client!, toIO: f.clientIO)))
        total &+= UInt64(bitPattern: Int64(f.sealAndOpen(from: f.client!, fromIO: f.clientIO, to: f.server!, toIO: f.serverIO)))
    }
    return total
}
