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
        if let list = config.cipherList, SSL_CTX_set_cipher_list(ctx, list) != 1 {
            throw .invalidValue(
                "cipher-list", at: sources.last("cipher-list") ?? .commandLine,
                expected: "an OpenSSL cipher list (see 'openssl ciphers')", value: list)
        }
        if let groups = config.ecCurveName {
            let set = groups.withCString {
                SSL_CTX_ctrl(ctx, SSL_CTRL_SET_GROUPS_LIST, 0, UnsafeMutableRawPointer(mutating: $0))
            }
            guard set == 1 else {
                throw .invalidValue(
                    "ec-curve-name", at: sources.last("ec-curve-name") ?? .commandLine,
                    expected: "a group OpenSSL knows (prime256v1, secp384r1, X25519, ...) or a colon-separated list",
                    value: groups)
            }
        }
    }
}
