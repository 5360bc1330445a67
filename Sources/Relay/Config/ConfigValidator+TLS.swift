import COpenSSL

extension ConfigValidator {
    /// The TLS settings only OpenSSL can judge (`cipher-list`, `ec-curve-name`), tried on a
    /// context made for the purpose: a name OpenSSL does not know is an error naming file, line
    /// and key when the configuration loads (and in `check-config`), not a start that stops at
    /// the TLS listeners.
    static func checkTLSSettings(_ config: RelayConfiguration, sources: ConfigSources) throws(ConfigError) {
        guard config.cipherList != nil || config.ecCurveName != nil else { return }
        ERR_clear_error()
        // Without memory for it, the TLS listeners' own context says so at the start.
        guard let ctx = SSL_CTX_new(TLS_server_method()) else { return }
        defer {
            SSL_CTX_free(ctx)
            ERR_clear_error()
        }
        switch applyTLSNames(config, to: ctx) {
        case nil: return
        case "cipher-list"?:
            throw .invalidValue(
                "cipher-list", at: sources.last("cipher-list") ?? .commandLine,
                expected: "an OpenSSL cipher list (see 'openssl ciphers')", value: config.cipherList)
        case let key?:
            throw .invalidValue(
                key, at: sources.last(key) ?? .commandLine,
                expected: "a group OpenSSL knows (prime256v1, secp384r1, X25519, ...) or a colon-separated list",
                value: config.ecCurveName)
        }
    }

    /// Sets `cipher-list` and `ec-curve-name` on `ctx` (the TLS and DTLS contexts, and the check
    /// above): the key OpenSSL refused, or nil.
    static func applyTLSNames(_ config: RelayConfiguration, to ctx: OpaquePointer) -> String? {
        if let list = config.cipherList, SSL_CTX_set_cipher_list(ctx, list) != 1 { return "cipher-list" }
        if let groups = config.ecCurveName,
            groups.withCString({ SSL_CTX_ctrl(ctx, SSL_CTRL_SET_GROUPS_LIST, 0, UnsafeMutableRawPointer(mutating: $0)) })
                != 1
        {
            return "ec-curve-name"
        }
        return nil
    }
}
