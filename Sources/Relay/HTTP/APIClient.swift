import COpenSSL
import Foundation
import Glibc

/// A small blocking HTTP/1.1 client for relayd's own API: what `relayd sessions`, `kick` and
/// `block` use (docs/admin.md). One request per connection (`Connection: close`), over TCP or
/// TLS 1.2+ through OpenSSL, bounded by a timeout.
public struct APIClient: Sendable {
    /// Where the API listens and how to trust it.
    public struct Endpoint: Sendable {
        public var host: String
        public var port: UInt16
        public var tls: Bool
        /// Trust exactly this certificate (the server's own `api-cert`, read from its configuration);
        /// the host name is then not checked.
        public var pinnedCertificate: String?
        /// Trust the CAs in this PEM file (else the system's), and check the host name.
        public var caFile: String?
        /// Trust exactly the certificate whose DER form has this SHA-256 (lowercase hex), as a
        /// node publishes it in the cluster's registry (docs/admin.md, "A fleet").
        public var pinnedSHA256: String?
        /// Check nothing (a self-signed certificate in a test).
        public var insecure = false

        public init(host: String, port: UInt16, tls: Bool) {
            self.host = host
            self.port = port
            self.tls = tls
        }

        /// `http://host:port` or `https://host:port` (a bracketed IPv6 host allowed); nil otherwise.
        public init?(url: String) {
            let tls: Bool
            var rest: Substring
            if url.hasPrefix("https://") {
                tls = true
                rest = url.dropFirst(8)
            } else if url.hasPrefix("http://") {
                tls = false
                rest = url.dropFirst(7)
            } else {
                return nil
            }
            while rest.hasSuffix("/") { rest = rest.dropLast() }
            var host: Substring
            var port: UInt16 = tls ? 443 : 80
            if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
                host = rest[rest.index(after: rest.startIndex)..<close]
                let after = rest[rest.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":"), let p = UInt16(after.dropFirst()) else { return nil }
                    port = p
                }
            } else if let colon = rest.lastIndex(of: ":") {
                host = rest[..<colon]
                guard let p = UInt16(rest[rest.index(after: colon)...]) else { return nil }
                port = p
            } else {
                host = rest
            }
            guard !host.isEmpty, !host.contains("/") else { return nil }
            self.init(host: String(host), port: port, tls: tls)
        }

        public var url: String {
            let h = host.contains(":") ? "[\(host)]" : host
            return "\(tls ? "https" : "http")://\(h):\(port)"
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public struct Response: Sendable {
        public let status: Int
        public let body: String
    }

    public let endpoint: Endpoint
    public let token: String?
    /// Answers above this are refused (a page of 1,000 allocations is about 0.5 MB).
    static let maxResponseBytes = 32 << 20
    public var timeoutSeconds = 10

    public init(endpoint: Endpoint, token: String?) {
        self.endpoint = endpoint
        self.token = token
    }

    /// Sends one request and reads the whole answer.
    public func send(_ method: String, _ path: String, body: String? = nil) throws(Failure) -> Response {
        let fd = try connect()
        defer { close(fd) }
        let host = endpoint.host.contains(":") ? "[\(endpoint.host)]" : endpoint.host
        var request = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(endpoint.port)\r\nConnection: close\r\n"
        if let token { request += "Authorization: Bearer \(token)\r\n" }
        if let body {
            request += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        } else {
            request += "Content-Length: 0\r\n\r\n"
        }
        let raw = endpoint.tls ? try exchangeTLS(fd, Array(request.utf8)) : try exchangePlain(fd, Array(request.utf8))
        return try Self.parse(raw)
    }

    /// The first certificate of a PEM file, or nil.
    static func firstCertificate(_ path: String) -> OpaquePointer? {
        guard let bio = BIO_new_file(path, "r") else { return nil }
        defer { BIO_free(bio) }
        return PEM_read_bio_X509(bio, nil, nil, nil)
    }

    /// The lowercase hex SHA-256 of a certificate's DER form: what a node publishes in the
    /// cluster's registry and what the fleet commands pin (docs/admin.md, "A fleet").
    static func sha256Hex(_ certificate: OpaquePointer) -> String? {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard X509_digest(certificate, EVP_sha256(), &digest, &length) == 1, length == 32 else { return nil }
        let hex = Array("0123456789abcdef".utf8)
        return String(decoding: digest.flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 15)]] }, as: UTF8.self)
    }

    static func parse(_ raw: [UInt8]) throws(Failure) -> Response {
        let text = String(decoding: raw, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw Failure(description: "incomplete HTTP response") }
        // Lines split on CRLF as bytes: Swift treats "\r\n" as one Character.
        let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let statusLine = lines[0]
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw Failure(description: "not an HTTP response: \(statusLine.prefix(80))")
        }
        let body = String(text[split.upperBound...])
        if let field = lines.dropFirst().first(where: { $0.lowercased().hasPrefix("content-length:") }) {
            let value = field.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)
            guard let length = Int(value), body.utf8.count >= length else {
                throw Failure(description: "truncated HTTP response")
            }
        }
        return Response(status: status, body: body)
    }

    private func connect() throws(Failure) -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>? = nil
        let status = getaddrinfo(endpoint.host, "\(endpoint.port)", &hints, &list)
        guard status == 0, let list else {
            throw Failure(description: "cannot resolve \(endpoint.host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var lastError = ECONNREFUSED
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let e = entry {
            entry = e.pointee.ai_next
            let fd = socket(e.pointee.ai_family, e.pointee.ai_socktype, e.pointee.ai_protocol)
            guard fd >= 0 else { continue }
            var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            if Glibc.connect(fd, e.pointee.ai_addr, e.pointee.ai_addrlen) == 0 { return fd }
            lastError = errno
            close(fd)
        }
        throw Failure(description: "cannot connect to \(endpoint.url): \(String(cString: strerror(lastError)))")
    }

    private func exchangePlain(_ fd: Int32, _ request: [UInt8]) throws(Failure) -> [UInt8] {
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw Failure(description: "cannot send to \(endpoint.url): \(String(cString: strerror(errno)))") }
            sent += n
        }
        return try readAll { buffer throws(Failure) in
            let n = read(fd, buffer.baseAddress, buffer.count)
            guard n >= 0 else { throw Failure(description: "no answer from \(endpoint.url): \(String(cString: strerror(errno)))") }
            return n
        }
    }

    /// Reads until `next` says the answer ended (0 bytes), up to `maxResponseBytes`.
    private func readAll(_ next: (UnsafeMutableRawBufferPointer) throws(Failure) -> Int) throws(Failure) -> [UInt8] {
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let read = buffer.withUnsafeMutableBytes { b in Result { () throws(Failure) -> Int in try next(b) } }
            let n = try read.get()
            if n == 0 { return response }
            response += buffer[0..<n]
            guard response.count <= Self.maxResponseBytes else { throw Failure(description: "answer too large") }
        }
    }

    private func exchangeTLS(_ fd: Int32, _ request: [UInt8]) throws(Failure) -> [UInt8] {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw Failure(description: "OpenSSL: no TLS context") }
        defer { SSL_CTX_free(ctx) }
        var pinnedLeaf: OpaquePointer? = nil
        defer { if let pinnedLeaf { X509_free(pinnedLeaf) } }
        SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        // evhttp closes after the answer without close_notify; the body's length is known.
        SSL_CTX_set_options(ctx, RELAYD_SSL_OP_IGNORE_UNEXPECTED_EOF)
        let isIP = endpoint.host.contains(":") || endpoint.host.allSatisfy { $0.isNumber || $0 == "." }
        if !endpoint.insecure && endpoint.pinnedSHA256 == nil {
            if let pinned = endpoint.pinnedCertificate {
                // The first certificate of the file (the leaf of a fullchain.pem) is the only
                // trust anchor: a CA certificate later in the file must not vouch for others.
                guard let leaf = Self.firstCertificate(pinned) else {
                    throw Failure(description: "cannot read the certificate \(pinned)")
                }
                pinnedLeaf = leaf
                X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), leaf)
                X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(ctx), UInt(X509_V_FLAG_PARTIAL_CHAIN))
            } else if let caFile = endpoint.caFile {
                guard SSL_CTX_load_verify_locations(ctx, caFile, nil) == 1 else {
                    throw Failure(description: "cannot read the CA file \(caFile)")
                }
            } else {
                SSL_CTX_set_default_verify_paths(ctx)
            }
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        }
        guard let ssl = SSL_new(ctx) else { throw Failure(description: "OpenSSL: no TLS session") }
        defer { SSL_free(ssl) }
        if !endpoint.insecure && endpoint.pinnedCertificate == nil && endpoint.pinnedSHA256 == nil {
            let param = SSL_get0_param(ssl)
            let set = isIP ? X509_VERIFY_PARAM_set1_ip_asc(param, endpoint.host) : SSL_set1_host(ssl, endpoint.host)
            guard set == 1 else { throw Failure(description: "cannot check the certificate against '\(endpoint.host)'") }
        }
        if !isIP {
            _ = endpoint.host.withCString {
                SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name), UnsafeMutableRawPointer(mutating: $0))
            }
        }
        SSL_set_fd(ssl, fd)
        guard SSL_connect(ssl) == 1 else {
            let verify = SSL_get_verify_result(ssl)
            let reason =
                verify != X509_V_OK
                ? String(cString: X509_verify_cert_error_string(verify))
                : ERR_reason_error_string(ERR_get_error()).map { String(cString: $0) } ?? "connection closed"
            throw Failure(
                description: "TLS handshake with \(endpoint.url) failed: \(reason) (see --cacert, --insecure)")
        }
        if let pinnedLeaf {
            let peer = SSL_get1_peer_certificate(ssl)
            defer { if let peer { X509_free(peer) } }
            guard let peer, X509_cmp(peer, pinnedLeaf) == 0 else {
                throw Failure(description: "\(endpoint.url) does not serve the configured certificate")
            }
        }
        if let digest = endpoint.pinnedSHA256, !endpoint.insecure {
            // The chain is not what vouches here: the digest the registry holds is.
            let peer = SSL_get1_peer_certificate(ssl)
            defer { if let peer { X509_free(peer) } }
            guard let peer, Self.sha256Hex(peer) == digest else {
                throw Failure(description: "\(endpoint.url) does not serve the certificate the cluster's registry names")
            }
        }
        let written = request.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
        guard written == Int32(request.count) else { throw Failure(description: "cannot send to \(endpoint.url)") }
        return try readAll { buffer throws(Failure) in
            let n = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
            if n > 0 { return Int(n) }
            guard SSL_get_error(ssl, n) == SSL_ERROR_ZERO_RETURN else {
                throw Failure(description: "no answer from \(endpoint.url)")
            }
            return 0
        }
    }
}
