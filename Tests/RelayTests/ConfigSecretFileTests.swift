import Foundation
@testable import Relay
import Testing

/// Secrets read from files (docs/configuration.md, "Secrets in files"): the values go where the
/// secret would, the summary shows only the path, and every failure names the file, line and key
/// without the secret.
@Suite struct ConfigSecretFileTests {
    static let file = "conf/relayd.conf"

    /// A fresh directory with `files` written in it (mode 0600), removed by the caller.
    static func directory(_ files: [String: String]) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("relayd-secrets-\(UUID())").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        for (name, text) in files {
            _ = FileManager.default.createFile(
                atPath: "\(path)/\(name)", contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        }
        return path
    }

    static func load(_ text: String, arguments: [String] = []) throws -> RelayConfiguration {
        try RelayConfiguration.load(fileText: text, fileName: file, arguments: arguments).configuration
    }

    static func error(_ text: String) -> String? {
        do {
            _ = try load(text)
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test("Secrets, API keys, the Redis password and the key's password come from files")
    func values() throws {
        let dir = try Self.directory([
            "secrets": "# rotated monthly\nnew-secret-0123456789\n\n  old-secret-9876543210  \n",
            "keys": "backend:tok-0123456789abcdef0123\nops:tok-fedcba9876543210fedc:admin\n",
            "redis": "redis-pw-00112233\n", "pkey": "key-pw\n",
        ])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let c = try Self.load("""
            use-auth-secret
            static-auth-secret-file=\(dir)/secrets
            api-key-file=\(dir)/keys
            cluster-redis=redis://relay:@10.0.0.9:6380/2
            cluster-redis-password-file=\(dir)/redis
            pkey-pwd-file=\(dir)/pkey
            """)
        #expect(c.staticAuthSecrets == ["new-secret-0123456789", "old-secret-9876543210"])
        #expect(c.apiKeys.map(\.name) == ["backend", "ops"] && c.apiKeys.last?.scope == .admin)
        #expect(c.clusterRedis?.password == "redis-pw-00112233")
        #expect(c.clusterRedis?.user == "relay")
        #expect(c.pkeyPassword == "key-pw")
        let summary = c.redactedSummary()
        #expect(summary.contains { $0.key == "static-auth-secret-file" && $0.value == "\(dir)/secrets" })
        for secret in ["new-secret", "old-secret", "tok-", "redis-pw", "key-pw"] {
            #expect(!summary.contains { $0.value.contains(secret) }, "\(secret) shows in the summary")
        }
    }

    @Test("A URL's own password and a password file conflict; a URL without one takes the file's")
    func redisPassword() throws {
        let dir = try Self.directory(["redis": "pw-from-file\n"])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try Self.load("no-auth\ncluster-redis=redis://10.0.0.9\ncluster-redis-password-file=\(dir)/redis\n")
            .clusterRedis?.password == "pw-from-file")
        #expect(try Self.load("no-auth\ncluster-redis=redis+sentinel://h1,h2/m\ncluster-redis-password-file=\(dir)/redis\n")
            .clusterRedis?.password == "pw-from-file")
        let both = Self.error("no-auth\ncluster-redis=redis://:inline@h\ncluster-redis-password-file=\(dir)/redis\n")
        #expect(both?.contains("\(Self.file):3") == true && both?.contains("cluster-redis-password-file") == true, "\(both ?? "")")
        #expect(both?.contains("inline") == false)
        #expect(Self.error("no-auth\ncluster-redis-password-file=\(dir)/redis\n")?.contains("without cluster-redis") == true)
    }

    @Test("Unreadable, empty, oversized, non-UTF-8 or ambiguous files are errors naming file, line and key")
    func failures() throws {
        let dir = try Self.directory([
            "empty": "# nothing\n\n", "two": "a\nb\n", "big": String(repeating: "x", count: SecretFile.maximumBytes + 1),
            "secret": "s3cret-value-0123\n",
        ])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = FileManager.default.createFile(atPath: "\(dir)/binary", contents: Data([0xff, 0xfe, 0x0a]))
        let cases: [(String, String)] = [
            ("static-auth-secret-file=\(dir)/missing", "No such file"),
            ("static-auth-secret-file=\(dir)", "regular file"),
            ("static-auth-secret-file=\(dir)/empty", "holds none"),
            ("static-auth-secret-file=\(dir)/big", "at most"),
            ("static-auth-secret-file=\(dir)/binary", "UTF-8"),
            ("pkey-pwd-file=\(dir)/two", "one value"),
            ("api-key-file=\(dir)/secret", "name:token"),
        ]
        for (line, words) in cases {
            let secretFile = line.hasPrefix("static-auth-secret-file")
            let message = Self.error(
                "use-auth-secret\n" + (secretFile ? "" : "static-auth-secret=x-0123456789abcdef\n") + line + "\n")
            #expect(message?.contains("\(Self.file):\(secretFile ? 2 : 3)") == true, "\(line): \(message ?? "")")
            #expect(message?.contains(String(line.prefix { $0 != "=" })) == true, "\(line): \(message ?? "")")
            #expect(message?.contains(words) == true, "\(line): \(message ?? "")")
            #expect(message?.contains("s3cret-value") == false)
        }
        let both = Self.error("use-auth-secret\nstatic-auth-secret=abc-0123456789abcdef\nstatic-auth-secret-file=\(dir)/secret\n")
        #expect(both?.contains("give the secret in one place") == true, "\(both ?? "")")
    }
}
