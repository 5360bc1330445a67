import ArgumentParser
import Logging
import Relay
import RelayCore

/// `relayd`: the STUN/TURN relay daemon. Every coturn `turnserver.conf` key also works as a
/// long option (`--listening-port=3478`); the command line overrides the file.
@main
struct RelaydCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relayd",
        abstract: "STUN/TURN relay server (RFC 8489, RFC 8656, RFC 6156), coturn-compatible configuration.",
        version: RelaydVersion.string,
        subcommands: [
            Serve.self, CheckConfig.self, Credentials.self, Cluster.self, Sessions.self, Kick.self, Block.self,
            Unblock.self, Upgrade.self, Users.self,
        ],
        defaultSubcommand: Serve.self
    )
}
