import Foundation
import Glibc
import Relay
import RelayCore
import StunCodec
import Testing

@testable import CoreTestSupport

/// The built `relayd` binary on real UDP sockets on 127.0.0.1: the whole TURN flow a WebRTC
/// client runs, with a plain UDP socket as the peer, then a clean SIGTERM shutdown.
@Suite struct DaemonIntegrationTests {
    private static let realm = "example.org"

    /// `relayd` from the same build as this test bundle, else from a build directory of the package.
    static func relaydBinary() -> String? {
        let fm = FileManager.default
        var candidates: [String] = []
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        var directory = bundle.deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(directory.appendingPathComponent("relayd").path)
            directory = directory.deletingLastPathComponent()
        }
        var root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while root.path != "/" && !fm.fileExists(atPath: root.appendingPathComponent("Package.swift").path) {
            root = root.deletingLastPathComponent()
        }
        for build in [".build-coretests", ".build"] {
            candidates.append(root.appendingPathComponent("\(build)/debug/relayd").path)
        }
        return candidates.first { path in
            var isDirectory: ObjCBool = false
            return fm.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
                && fm.isExecutableFile(atPath: path)
        }
    }

    /// A base port whose next 100 UDP ports on 127.0.0.1 are free right now.
    static func freeRelayRange() throws -> UInt16 {
        for _ in 0..<20 {
            let base = UInt16.random(in: 20_000...59_000)
            let sockets = (0..<100).compactMap { try? UDPTestSocket(port: base + UInt16($0)) }
            if sockets.count == 100 { return base }
        }
        throw UDPTestSocket.Failure(description: "no free range of 100 UDP ports found")
    }

    /// A running relayd and where its log goes; terminated by PID.
    ///
    /// Spawned the way init or a shell starts a daemon: empty signal mask, default dispositions.
    /// (Foundation's `Process` would pass on the mask of the test runner's worker thread, which
    /// blocks SIGTERM.)
    final class Daemon {
        let pid: pid_t
        let logPath: String
        let configPath: String
        /// The wait status once the process has been reaped.
        private(set) var waitStatus: Int32?

        struct LaunchFailure: Error, CustomStringConvertible {
            var description: String
        }

        /// `configText` nil: no `-c FILE` (another program than relayd, e.g. redis-server).
        init(binary: String, arguments: [String], configText: String?) throws {
            let tag = "relayd-it-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            let directory = FileManager.default.temporaryDirectory
            configPath = directory.appendingPathComponent("\(tag).conf").path
            logPath = directory.appendingPathComponent("\(tag).log").path
            if let configText { try configText.write(toFile: configPath, atomically: true, encoding: .utf8) }

            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            var emptyMask = sigset_t()
            sigemptyset(&emptyMask)
            posix_spawnattr_setsigmask(&attributes, &emptyMask)
            var defaults = sigset_t()
            sigemptyset(&defaults)
            for sig in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, sig) }
            posix_spawnattr_setsigdefault(&attributes, &defaults)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)

            let argv = ([binary] + (configText == nil ? [] : ["-c", configPath]) + arguments).map { strdup($0) } + [nil]
            let envp = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { for p in argv + envp { free(p) } }
            var child: pid_t = 0
            let result = posix_spawn(&child, binary, &actions, &attributes, argv, envp)
            guard result == 0 else {
                throw LaunchFailure(description: "posix_spawn \(binary): \(String(cString: strerror(result)))")
            }
            pid = child
        }

        var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

        var isRunning: Bool {
            if waitStatus != nil { return false }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                waitStatus = status
                return false
            }
            return true
        }

        /// True when the process ended by calling exit (not by a signal).
        var exitedNormally: Bool { waitStatus.map { $0 & 0x7F == 0 } ?? false }
        /// The exit status, when it exited normally.
        var exitCode: Int32? { exitedNormally ? waitStatus.map { ($0 >> 8) & 0xFF } : nil }

        /// Sends `signal` and waits (bounded) for the process to end; false if it did not.
        func stop(signal: Int32 = SIGTERM, waitingUpTo seconds: Double = 15) -> Bool {
            guard isRunning else { return true }
            kill(pid, signal)
            let deadline = Date().addingTimeInterval(seconds)
            while isRunning && Date() < deadline { usleep(20_000) }
            return !isRunning
        }

        deinit {
            if isRunning {
                kill(pid, SIGKILL)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
            }
            try? FileManager.default.removeItem(atPath: configPath)
            try? FileManager.default.removeItem(atPath: logPath)
        }
    }

    @Test("relayd answers the full TURN flow on 127.0.0.1 and exits cleanly on SIGTERM")
    func fullFlow() throws {
        let binary = try #require(
            Self.relaydBinary(),
            "relayd is not built next to the test bundle; run `swift build --scratch-path <same path>` before `swift test`"
        )

        let listeningPort = try UDPTestSocket.freePort()
        let apiPort = try UDPTestSocket.freePort()
        let minPort = try Self.freeRelayRange()
        let maxPort = minPort + 99
        let secret = (0..<24).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.joined()
        let server = TransportAddress(ip: .ipv4Loopback, port: listeningPort)
        let daemon = try Daemon(
            binary: binary,
            arguments: [
                "--listening-ip=127.0.0.1", "--listening-port=\(listeningPort)", "--relay-ip=127.0.0.1",
                "--min-port=\(minPort)", "--max-port=\(maxPort)", "--use-auth-secret", "--static-auth-secret=\(secret)",
                "--realm=\(Self.realm)", "--allow-loopback-peers", "--no-tcp", "--no-tls", "--api-listening-port=\(apiPort)",
            ],
            configText: "# relayd integration test\nfingerprint\nstale-nonce=600\nno-tls\nno-tcp\n")

        // Wait (bounded) until a Binding is answered.
        let client = try UDPTestSocket(timeoutMilliseconds: 2000)
        let probe = try UDPTestSocket(timeoutMilliseconds: 100)
        var binding: ReceivedStun? = nil
        for _ in 0..<100 where binding == nil && daemon.isRunning {
            let request = try StunTestMessages.binding()
            binding = try probe.exchange(request, with: server) {
                Array($0.prefix(20).suffix(12)) == Array(request[8..<20])
            }
            .map(ReceivedStun.init)
        }
        let answered = try #require(binding, "relayd did not answer a Binding; log:\n\(daemon.log)")
        #expect(answered.xorMappedAddress == probe.address)

        // The client: REST credentials, the 401 dance, all over the real socket.
        let username = "\(Int64(time(nil)) + 3600):alice"
        let turn = TurnTestClient(
            username: username, password: KeyDerivation.restPassword(secret: secret, username: username)
        ) { request in
            try client.exchange(request, with: server) { answer in
                answer.count >= 20 && answer[0] < 4 && Array(answer[8..<20]) == Array(request[8..<20])
            }.map(ReceivedStun.init)
        }

        let unsigned = try StunTestMessages.request(.allocate) { w in try w.append(RequestedTransport.udp) }
        let challenge = try #require(try turn.send(unsigned), "no answer to Allocate; log:\n\(daemon.log)")
        #expect(challenge.errorCode == 401)
        #expect(challenge.realm == Self.realm)
        #expect(challenge.nonce != nil)
        #expect(!challenge.contains(.messageIntegrity))
        turn.learn(from: challenge)

        let allocated = try turn.allocate()
        try #require(allocated.isSuccess, "Allocate failed: \(allocated); log:\n\(daemon.log)")
        #expect(allocated.integrity(key: turn.key) == .valid)
        #expect(allocated.lifetime == 600)
        #expect(allocated.xorMappedAddress == client.address)
        #expect(allocated.attributeTypes.last == .fingerprint)
        let relayed = try #require(allocated.xorRelayedAddress)
        #expect(relayed.ip == .ipv4Loopback)
        #expect((minPort...maxPort).contains(relayed.port))

        let peer = try UDPTestSocket(timeoutMilliseconds: 2000)
        #expect(try turn.createPermission([peer.address]).isSuccess)

        // Peer -> client before any channel: a Data indication (RFC 8656 §11.3).
        let early = Array("data indication before the channel".utf8)
        try peer.send(early, to: relayed)
        let indication = try ReceivedStun(try #require(try client.receive(), "no Data indication").bytes)
        #expect(indication.type == MessageType(method: .data, messageClass: .indication))
        #expect(indication.xorPeerAddress == peer.address)
        #expect(indication.data == early)

        // Client -> peer with a Send indication.
        let viaSend = Array("send indication".utf8)
        try client.send(try StunTestMessages.sendIndication(to: peer.address, payload: viaSend), to: server)
        let sentOn = try #require(try peer.receive(), "peer got nothing from the Send indication")
        #expect(sentOn.bytes == viaSend)
        #expect(sentOn.from == relayed)

        #expect(try turn.channelBind(0x4000, to: peer.address).isSuccess)

        // Client -> peer as ChannelData, odd length and a large binary payload.
        for payload in [Array("odd13bytes!!!".utf8), (0..<1200).map { UInt8(truncatingIfNeeded: $0 &* 31) }] {
            try client.send(StunTestMessages.channelData(0x4000, payload), to: server)
            let atPeer = try #require(try peer.receive(), "peer got nothing from ChannelData")
            #expect(atPeer.bytes == payload)
            #expect(atPeer.from == relayed)
        }

        // Peer -> client as ChannelData now that the channel exists.
        let reply = Array("channel data to the client".utf8) + [0x00, 0xFF, 0x7F]
        try peer.send(reply, to: relayed)
        let framed = try #require(try client.receive(), "client got nothing from the peer")
        #expect(framed.from == server)
        #expect(ReceivedChannelData(framed.bytes) == ReceivedChannelData(StunTestMessages.channelData(0x4000, reply)))

        // Refresh 0 deletes; a further Refresh finds no allocation.
        let deleted = try turn.refresh(lifetime: 0)
        #expect(deleted.isSuccess)
        #expect(deleted.lifetime == 0)
        #expect(try turn.refresh().errorCode == 437)

        let stopped = daemon.stop()
        try #require(stopped, "relayd did not exit after SIGTERM; log:\n\(daemon.log)")
        #expect(daemon.exitedNormally, "wait status \(daemon.waitStatus ?? -1); log:\n\(daemon.log)")
        #expect(daemon.exitCode == 0, "log:\n\(daemon.log)")
        #expect(daemon.log.contains("shutting down"))
    }
}
