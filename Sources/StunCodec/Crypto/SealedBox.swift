internal import CCrypto

/// AES-256-GCM (OpenSSL's EVP interface): authenticated encryption for values the server hands
/// out and must get back unaltered, such as mobility tickets (RFC 8016 §3.3, docs/mobility.md).
///
/// A sealed value is `nonce (12) || ciphertext || tag (16)`. The caller picks the nonce; under
/// one key, a nonce must never repeat.
public enum SealedBox {
    public static let keyLength = 32
    public static let nonceLength = 12
    public static let tagLength = 16
    /// Bytes a sealed value adds to its plaintext.
    public static let overhead = nonceLength + tagLength

    /// Encrypts and authenticates `plaintext` (and authenticates `associated`) under `key`.
    /// Nil only if OpenSSL fails.
    public static func seal(_ plaintext: [UInt8], associated: [UInt8] = [], key: [UInt8], nonce: [UInt8]) -> [UInt8]? {
        precondition(key.count == keyLength && nonce.count == nonceLength)
        guard let ctx = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: nonceLength + plaintext.count + tagLength)
        var length: Int32 = 0
        let ok = out.withUnsafeMutableBufferPointer { o -> Bool in
            let base = o.baseAddress!
            base.update(from: nonce, count: nonceLength)
            guard EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nil, key, nonce) == 1 else { return false }
            if !associated.isEmpty {
                guard EVP_EncryptUpdate(ctx, nil, &length, associated, Int32(associated.count)) == 1 else { return false }
            }
            if !plaintext.isEmpty {
                guard EVP_EncryptUpdate(ctx, base + nonceLength, &length, plaintext, Int32(plaintext.count)) == 1,
                    length == Int32(plaintext.count)
                else { return false }
            }
            guard EVP_EncryptFinal_ex(ctx, base + nonceLength + plaintext.count, &length) == 1 else { return false }
            return EVP_CIPHER_CTX_ctrl(
                ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagLength), base + nonceLength + plaintext.count) == 1
        }
        return ok ? out : nil
    }

    /// The plaintext of a value `seal` made under `key` with the same `associated` data; nil
    /// when it was made under another key, altered, truncated or forged.
    public static func open(_ sealed: UnsafeRawBufferPointer, associated: [UInt8] = [], key: [UInt8]) -> [UInt8]? {
        precondition(key.count == keyLength)
        guard sealed.count >= overhead, let source = sealed.baseAddress else { return nil }
        guard let ctx = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let bytes = source.assumingMemoryBound(to: UInt8.self)
        let count = sealed.count - overhead
        var plaintext = [UInt8](repeating: 0, count: count)
        var tag = Array(UnsafeBufferPointer(start: bytes + nonceLength + count, count: tagLength))
        var length: Int32 = 0
        let ok = plaintext.withUnsafeMutableBufferPointer { p -> Bool in
            guard EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nil, key, bytes) == 1 else { return false }
            if !associated.isEmpty {
                guard EVP_DecryptUpdate(ctx, nil, &length, associated, Int32(associated.count)) == 1 else { return false }
            }
            if count > 0 {
                guard EVP_DecryptUpdate(ctx, p.baseAddress, &length, bytes + nonceLength, Int32(count)) == 1 else {
                    return false
                }
            }
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), &tag) == 1 else { return false }
            var final: Int32 = 0
            return EVP_DecryptFinal_ex(ctx, p.baseAddress.map { $0 + count }, &final) == 1
        }
        return ok ? plaintext : nil
    }
}
