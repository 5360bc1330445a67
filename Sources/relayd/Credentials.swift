import ArgumentParser
import Foundation
import Relay
import StunCodec

/// `relayd credentials --secret-file F --user alice [--ttl 3600] [--format rest|ice-servers|webrtckit] [-c conf]`:
/// prints the JSON the credential service would answer, minted locally from the shared secret.
struct Credentials: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print TURN REST credentials (JSON, as GET /api/v1/credentials answers) for a user.",
        discussion: """
            The password is base64(HMAC-SHA1(secret, "<expiry>:<user>")), accepted by relayd and by coturn \
            (use-auth-secret) sharing the secret. With -c, the configuration gives the URIs (advertised-uri, or \
            derived from external-ip/listening-ip and the ports), rest-api-separator, credential-ttl and \
            credential-max-ttl, and its first static-auth-secret when no --secret-file is given.
            """)

    @Option(name: .customLong("secret-file"), help: "File holding the static-auth-secret (its first non-empty line).")
    var secretFile: String?

    @Option(help: "User id, the part of the username after the separator (1-64 characters).")
    var user: String

    @Option(help: "Lifetime in seconds (default: credential-ttl; capped at credential-max-ttl).")
    var ttl: String?

    @Option(help: "Response shape: rest, ice-servers or webrtckit.")
    var format: String = CredentialRequest.Format.rest.rawValue

    @Option(name: [.customShort("c"), .customLong("config")], help: "relayd.conf (coturn turnserver.conf syntax).")
    var config: String?

    func run() throws {
        var secret: String? = nil
        if let secretFile {
            guard let text = try Self.readSecret(secretFile) else {
                throw ValidationError("\(secretFile) holds no secret")
            }
            secret = text
        }
        var configuration = RelayConfiguration()
        if let config {
            // The secret file supplies the auth mode a credentials-only configuration may lack.
            let extra = secret.map { ["--use-auth-secret", "--static-auth-secret=\($0)"] } ?? []
            configuration = try LoadedConfiguration.load(["-c", config] + extra).configuration
        }
        if let secret {
            configuration.useAuthSecret = true
            configuration.staticAuthSecrets.removeAll { $0 == secret }
            configuration.staticAuthSecrets.insert(secret, at: 0)
        }
        let interfaces = configuration.listeningIPs.isEmpty ? InterfaceAddresses.current() : []
        let service = CredentialService(configuration: configuration, interfaceAddresses: interfaces)
        guard service.isAvailable else {
            throw ValidationError("no secret: give --secret-file, or -c with use-auth-secret and static-auth-secret")
        }
        let request: CredentialRequest
        do {
            request = try CredentialRequest.validated(
                user: user, ttl: ttl, format: format, separator: configuration.restAPISeparator)
        } catch {
            throw ValidationError(error.message)
        }
        guard let issued = service.issue(request, now: Int64(Date().timeIntervalSince1970)) else {
            throw ExitCode(1)
        }
        print(issued.json(request.format))
    }

    /// The first non-empty line of `path`, without surrounding whitespace.
    static func readSecret(_ path: String) throws -> String? {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ValidationError("cannot read \(path): \(error.localizedDescription)")
        }
        return text.split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .first { !$0.isEmpty }
    }
}
