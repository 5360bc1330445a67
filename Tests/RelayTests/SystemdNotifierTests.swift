import Glibc
import Relay
import Testing

/// sd_notify over a temporary AF_UNIX datagram socket standing in for systemd's NOTIFY_SOCKET.
@Suite struct SystemdNotifierTests {
    /// A bound AF_UNIX datagram socket: a filesystem path, or an abstract name (`@...`).
    final class NotifySocket {
        let name: String
        let descriptor: Int32

        init(abstract: Bool) throws {
            let tag = "relayd-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            name = abstract ? "@\(tag)" : "/tmp/\(tag).sock"
            descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            try #require(descriptor >= 0)
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            var bytes = Array(name.utf8)
            if abstract { bytes[0] = 0 }
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
            let length = socklen_t(
                MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + (abstract ? 0 : 1))
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
            }
            try #require(bound == 0, "bind \(name): \(String(cString: strerror(errno)))")
        }

        deinit {
            close(descriptor)
            if !name.hasPrefix("@") { unlink(name) }
        }

        /// The next datagram as text, or nil after the 2 s receive timeout.
        func receive() -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count >= 0 else { return nil }
            return String(decoding: buffer[0..<count], as: UTF8.self)
        }
    }

    @Test("Datagrams reach a NOTIFY_SOCKET path and an abstract socket, in order", arguments: [false, true])
    func sendsEachState(abstract: Bool) throws {
        let listener = try NotifySocket(abstract: abstract)
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": listener.name])
        #expect(notifier.isActive)
        #expect(notifier.notifyReady(status: "serving"))
        #expect(notifier.notifyReloading())
        #expect(notifier.notify("READY=1"))
        #expect(notifier.notifyStopping())
        #expect(listener.receive() == "READY=1\nSTATUS=serving")
        let reloading = try #require(listener.receive())
        #expect(reloading.hasPrefix("RELOADING=1\nMONOTONIC_USEC="))
        let usec = try #require(UInt64(reloading.dropFirst("RELOADING=1\nMONOTONIC_USEC=".count)))
        #expect(usec > 0 && usec <= SystemdNotifier.monotonicMicroseconds())
        #expect(listener.receive() == "READY=1")
        #expect(listener.receive() == "STOPPING=1")
    }

    @Test("A line break in a status cannot start a new assignment")
    func statusIsOneLine() throws {
        let listener = try NotifySocket(abstract: true)
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": listener.name])
        notifier.notifyStatus("draining\nREADY=1")
        #expect(listener.receive() == "STATUS=draining READY=1")
    }

    @Test("WATCHDOG=1 is sent when WATCHDOG_USEC is set for this process")
    func watchdog() throws {
        let listener = try NotifySocket(abstract: false)
        let notifier = SystemdNotifier(
            environment: ["NOTIFY_SOCKET": listener.name, "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "\(getpid())"])
        #expect(notifier.watchdogInterval == .seconds(30))
        #expect(notifier.notifyWatchdog())
        #expect(listener.receive() == "WATCHDOG=1")
    }

    @Test("The watchdog is off without WATCHDOG_USEC, with 0, or when WATCHDOG_PID names another process")
    func watchdogOff() {
        let socket = ["NOTIFY_SOCKET": "@unused"]
        #expect(SystemdNotifier(environment: socket).watchdogInterval == nil)
        #expect(SystemdNotifier(environment: socket.merging(["WATCHDOG_USEC": "0"]) { $1 }).watchdogInterval == nil)
        let other = socket.merging(["WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"]) { $1 }
        #expect(SystemdNotifier(environment: other, processID: 4242).watchdogInterval == nil)
        #expect(SystemdNotifier(environment: other, processID: 1).watchdogInterval == .seconds(1))
        #expect(!SystemdNotifier(environment: socket).notifyWatchdog())
    }

    @Test("Without NOTIFY_SOCKET (or with an unsupported one) the notifier is inactive and sends nothing")
    func inactive() {
        for environment in [[:], ["NOTIFY_SOCKET": ""], ["NOTIFY_SOCKET": "vsock:2:1234"]] {
            let notifier = SystemdNotifier(environment: environment)
            #expect(!notifier.isActive)
            #expect(!notifier.notifyReady())
        }
    }

    @Test("A socket nobody listens on makes notify return false, not fail")
    func missingSocket() {
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/tmp/relayd-no-such-\(getpid()).sock"])
        #expect(notifier.isActive)
        #expect(!notifier.notify("READY=1"))
    }
}
