import COpenSSL
import CStreamIO
import Glibc

/// An OpenSSL server context built from the TLS keys (`cert`, `pkey`, `pkey-pwd`, `cipher-list`,
/// `no-tlsv1`, `no-tlsv1_1`, `no-tlsv1_2`). Immutable once built: SIGHUP builds a new one for new
/// connections, while every live session keeps the context it started with (each `SSL` holds a
/// reference to its `SSL_CTX`).
///
/// `@unchecked Sendable` because the only state is the `SSL_CTX` pointer: OpenSSL reference-counts
/// and locks it internally, nothing changes it after `init`, and `SSL_new` from several loop
/// threads at once is supported.
final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer
    /// SHA-256 of the leaf certificate as colon-separated hex (logged on load and reload).
    let fingerprint: String
    /// The lowest protocol version accepted, as OpenSSL names it ("TLSv1.2").
    let minimumVersion: String
    /// When the leaf certificate expires (its notAfter), in unix seconds; nil if unreadable.
    let notAfter: Int64?
    /// The session-ticket keys (RFC 8446 §4.6.1, RFC 5077 §4): OpenSSL's 80 bytes of key name,
    /// HMAC key and AES key. A live upgrade hands them on, so a ticket issued before it resumes
    /// after it (docs/live-upgrade.md); a SIGHUP draws new ones with the new context.
    let ticketKeys: [UInt8]

    /// Whether `SSL_free_buffers` may be called on an idle session: not on the OpenSSL releases
    /// where it frees a read buffer a record header is still waiting in (CVE-2024-4741: 3.0
    /// before 3.0.14, 3.1 before 3.1.6, 3.2 before 3.2.2, 3.3 before 3.3.1).
    static let mayFreeBuffers: Bool = {
        let version = OpenSSL_version_num()
        let (major, minor, patch) = (version >> 28, (version >> 20) & 0xFF, (version >> 4) & 0xFFFF)
        guard major == 3 else { return major > 3 }
        switch minor {
        case 0: return patch >= 14
        case 1: return patch >= 6
        case 2: return patch >= 2
        case 3: return patch >= 1
        default: return true
        }
    }()

    /// The length of `ticketKeys`.
    static let ticketKeysLength = 80

    /// A certificate, key or setting OpenSSL refused, with OpenSSL's own reason.
    struct LoadError: Error, CustomStringConvertible {
        let description: String
    }

    /// ALPN protocol IDs served, in preference order (RFC 7443 §6): TURN, then STUN.
    static let alpnProtocols: [[UInt8]] = [Array("stun.turn".utf8), Array("stun.nat-discovery".utf8)]
    /// HTTP/1.1's ALPN ID (RFC 7301 §6), offered after them to a session the HTTP API may have.
    static let httpALPN: [UInt8] = Array("http/1.1".utf8)
    /// The `SSL` ex-data (index 0) of a session the HTTP API may have (`APIHandoff`): any
    /// non-nil pointer; only its presence is read.
    static var apiMarker: UnsafeMutableRawPointer? { UnsafeMutableRawPointer(bitPattern: 1) }

    /// Loads `cert` (a PEM chain, leaf first) and `pkey` (PEM; defaults to the `cert` file).
    /// Session tickets are sealed with `ticketKeys` when it has the right length, else with keys
    /// drawn at random. `streams`: the context of relayd's own TCP/TLS listeners, whose TLS 1.3
    /// sessions relayd takes over after the handshake unless `tls-openssl-records` (not the
    /// HTTP API's libevent listener, nor DTLS).
    init(
        configuration c: RelayConfiguration, datagram: Bool = false, streams: Bool = false,
        ticketKeys keys: [UInt8]? = nil
    ) throws(LoadError) {
        guard let certPath = c.cert else { throw LoadError(description: "no 'cert' configured") }
        let keyPath = c.pkey ?? certPath
        ERR_clear_error()
        guard let ctx = SSL_CTX_new(datagram ? DTLS_server_method() : TLS_server_method()) else {
            throw LoadError(description: "SSL_CTX_new: \(TLSContext.drainErrors())")
        }
        do throws(LoadError) {
            // DTLS: 1.2 only (RFC 8656 §3.1; DTLS 1.0 is TLS 1.1's counterpart), with the cookie
            // exchange of RFC 6347 §4.2.1 (docs/dtls.md).
            let version = datagram ? (value: DTLS1_2_VERSION, name: "DTLSv1.2") : TLSContext.minimumVersion(c)
            minimumVersion = version.name
            try TLSContext.configure(ctx, configuration: c, minimumVersion: version.value)
            ticketKeys = try TLSContext.setTicketKeys(ctx, keys)
            if datagram {
                guard relayd_dtls_configure(ctx) == 0 else {
                    throw LoadError(description: "cannot set up DTLS cookies: \(TLSContext.drainErrors())")
                }
                SSL_CTX_ctrl(ctx, SSL_CTRL_SET_READ_AHEAD, 1, nil)
            } else if streams, !c.tlsOpenSSLRecords, relayd_tls_records_capture(ctx) != 0 {
                throw LoadError(description: "cannot set up TLS record hand-over: \(TLSContext.drainErrors())")
            }
            try TLSContext.loadCredentials(ctx, certPath: certPath, keyPath: keyPath, password: c.pkeyPassword)
            fingerprint = TLSContext.fingerprint(of: ctx)
            notAfter = TLSContext.notAfter(of: ctx)
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
        context = ctx
    }

    deinit {
        forgetTenants()
        SSL_CTX_free(context)
    }

    /// Whether the context of `ssl` hands its TLS 1.3 sessions' traffic secrets over for
    /// relayd's own records (`relayd_tls_records_capture`; not with `tls-openssl-records`).
    static func capturesSecrets(_ ssl: OpaquePointer) -> Bool {
        SSL_CTX_get_keylog_callback(SSL_get_SSL_CTX(ssl)) != nil
    }

    private static func setTicketKeys(_ ctx: OpaquePointer, _ given: [UInt8]?) throws(LoadError) -> [UInt8] {
        var keys = given ?? []
        if keys.count != ticketKeysLength {
            keys = [UInt8](repeating: 0, count: ticketKeysLength)
            guard RAND_bytes(&keys, Int32(keys.count)) == 1 else {
                throw LoadError(description: "cannot draw session-ticket keys: \(drainErrors())")
            }
        }
        guard SSL_CTX_ctrl(ctx, SSL_CTRL_SET_TLSEXT_TICKET_KEYS, keys.count, &keys) == 1 else {
            throw LoadError(description: "cannot set session-ticket keys: \(drainErrors())")
        }
        return keys
    }

    /// The floor is the lowest version not switched off: TLS 1.2 by default, 1.3 with `no-tlsv1_2`,
    /// 1.0 or 1.1 only when `tlsv1` / `tlsv1_1` turn them back on.
    private static func minimumVersion(_ c: RelayConfiguration) -> (value: Int32, name: String) {
        if !c.noTLSv1 { return (TLS1_VERSION, "TLSv1") }
        if !c.noTLSv1_1 { return (TLS1_1_VERSION, "TLSv1.1") }
        if !c.noTLSv1_2 { return (TLS1_2_VERSION, "TLSv1.2") }
        return (TLS1_3_VERSION, "TLSv1.3")
    }

    private static func configure(_ ctx: OpaquePointer, configuration c: RelayConfiguration, minimumVersion: Int32)
        throws(LoadError)
    {
        guard SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(minimumVersion), nil) == 1 else {
            throw LoadError(description: "cannot set the minimum TLS version: \(drainErrors())")
        }
        if minimumVersion < TLS1_2_VERSION {
            // OpenSSL 3 allows TLS 1.0/1.1 only at security level 0; the operator asked for them.
            SSL_CTX_set_security_level(ctx, 0)
        }
        // A client that drops the TCP connection without close_notify has simply closed: STUN
        // framing is self-delimiting, so truncation cannot go unnoticed.
        SSL_CTX_set_options(
            ctx,
            RELAYD_SSL_OP_NO_COMPRESSION | RELAYD_SSL_OP_NO_RENEGOTIATION | RELAYD_SSL_OP_CIPHER_SERVER_PREFERENCE
                | RELAYD_SSL_OP_IGNORE_UNEXPECTED_EOF)
        // Idle connections give their read/write buffers back; libevent may retry a write from a moved buffer.
        SSL_CTX_ctrl(ctx, SSL_CTRL_MODE, Int(SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), nil)
        // One TLS 1.3 ticket a full handshake, not OpenSSL's two: each connection's handshake
        // gives it a ticket for its own reconnect, and a ticket is for one use (RFC 8446 §4.6.1,
        // §C.4); the second costs a session copy, its encoding and sealing on every handshake
        // (docs/tls.md, "Resumption").
        SSL_CTX_set_num_tickets(ctx, 1)
        if let key = ConfigValidator.applyTLSNames(c, to: ctx) {
            let value = key == "cipher-list" ? c.cipherList : c.ecCurveName
            throw LoadError(description: "\(key) '\(value ?? "")': \(drainErrors())")
        }
        SSL_CTX_set_alpn_select_cb(
            ctx,
            { ssl, out, outLength, offered, offeredLength, _ in
                guard let out, let outLength, let offered else { return SSL_TLSEXT_ERR_NOACK }
                return TLSContext.selectALPN(
                    UnsafeBufferPointer(start: offered, count: Int(offeredLength)), out: out, outLength: outLength,
                    http: ssl.map { SSL_get_ex_data($0, 0) != nil } ?? false)
            }, nil)
    }

    private static func loadCredentials(_ ctx: OpaquePointer, certPath: String, keyPath: String, password: String?)
        throws(LoadError)
    {
        guard SSL_CTX_use_certificate_chain_file(ctx, certPath) == 1 else {
            throw LoadError(description: "cert '\(certPath)': \(drainErrors())")
        }
        let secret = password.flatMap { strdup($0) }
        if let secret {
            SSL_CTX_set_default_passwd_cb_userdata(ctx, secret)
            SSL_CTX_set_default_passwd_cb(ctx) { buffer, size, _, userdata in
                guard let buffer, let userdata, size > 0 else { return 0 }
                let password = userdata.assumingMemoryBound(to: CChar.self)
                let length = min(Int(size), strlen(password))
                memcpy(buffer, password, length)
                return Int32(length)
            }
        }
        let loaded = SSL_CTX_use_PrivateKey_file(ctx, keyPath, SSL_FILETYPE_PEM) == 1
        if let secret {
            SSL_CTX_set_default_passwd_cb(ctx, nil)
            SSL_CTX_set_default_passwd_cb_userdata(ctx, nil)
            memset(secret, 0, strlen(secret))
            free(secret)
        }
        guard loaded else { throw LoadError(description: "pkey '\(keyPath)': \(drainErrors())") }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            throw LoadError(description: "pkey '\(keyPath)' does not match cert '\(certPath)': \(drainErrors())")
        }
    }

    /// Picks the first of our protocols the client offered (RFC 7301 §3.2), with `http`
    /// HTTP/1.1 last; a client offering none of them still gets a connection, just without ALPN.
    static func selectALPN(
        _ offered: UnsafeBufferPointer<UInt8>, out: UnsafeMutablePointer<UnsafePointer<UInt8>?>,
        outLength: UnsafeMutablePointer<UInt8>, http: Bool = false
    ) -> Int32 {
        for wanted in http ? alpnProtocols + [httpALPN] : alpnProtocols {
            var i = 0
            while i < offered.count {
                let length = Int(offered[i])
                guard i + 1 + length <= offered.count else { break }
                let name = UnsafeBufferPointer(rebasing: offered[(i + 1)..<(i + 1 + length)])
                if name.elementsEqual(wanted) {
                    out.pointee = name.baseAddress
                    outLength.pointee = UInt8(length)
                    return SSL_TLSEXT_ERR_OK
                }
                i += 1 + length
            }
        }
        return SSL_TLSEXT_ERR_NOACK
    }

    private static func notAfter(of ctx: OpaquePointer) -> Int64? {
        guard let certificate = SSL_CTX_get0_certificate(ctx), let time = X509_get0_notAfter(certificate) else {
            return nil
        }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Int64(timegm(&parts))
    }

    private static func fingerprint(of ctx: OpaquePointer) -> String {
        guard let certificate = SSL_CTX_get0_certificate(ctx) else { return "" }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard X509_digest(certificate, EVP_sha256(), &digest, &length) == 1 else { return "" }
        return digest.prefix(Int(length)).map { byte in
            let hex = String(byte, radix: 16, uppercase: true)
            return byte < 16 ? "0" + hex : hex
        }.joined(separator: ":")
    }

    /// OpenSSL's queued error reasons for this thread, joined; clears the queue.
    static func drainErrors() -> String {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            reasons.append(describe(code))
        }
        return reasons.isEmpty ? "unknown error" : reasons.joined(separator: "; ")
    }

    /// One OpenSSL error code as text.
    static func describe(_ code: UInt) -> String {
        var buffer = [UInt8](repeating: 0, count: 256)
        buffer.withUnsafeMutableBufferPointer { ERR_error_string_n(code, $0.baseAddress, $0.count) }
        return String(decoding: buffer.prefix { $0 != 0 }, as: UTF8.self)
    }
}
