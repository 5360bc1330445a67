import Foundation
import Glibc

/// A minimal sd_notify(3) client without libsystemd: one datagram per state change on the
/// AF_UNIX socket named by `NOTIFY_SOCKET` (a filesystem path, or an abstract socket written
/// with a leading `@`). Inactive, and every call a no-op, when the variable is unset, so the
/// daemon behaves the same outside systemd.
///
/// Each call opens, sends on and closes its own socket: the value holds no descriptor, is
/// `Sendable`, and may be used from any thread.
public struct SystemdNotifier: Sendable {
    /// The socket to notify: `NOTIFY_SOCKET` as given (`/run/systemd/notify`, `@name`); nil
    /// when unset or in a form this client does not speak (e.g. `vsock:`).
    public let socketName: String?
    /// How often systemd expects `WATCHDOG=1` (`WATCHDOG_USEC`); nil when the watchdog is off or
    /// meant for another process (`WATCHDOG_PID` names a different PID). Ping at half of it, as
    /// sd_watchdog_enabled(3) advises.
    public let watchdogInterval: Duration?

    /// The longest `sun_path` the kernel accepts (108 bytes on Linux, terminator included).
    static let maximumPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path)

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from `environment`;
    /// `processID` is compared with `WATCHDOG_PID`.
    public init(
        environment: [String: String] = ProcessInfo.processInfo.environment, processID: pid_t = getpid()
    ) {
        if let name = environment["NOTIFY_SOCKET"], Self.isSupported(name) {
            socketName = name
        } else {
            socketName = nil
        }
        watchdogInterval = Self.watchdog(environment: environment, processID: processID)
    }

    /// Whether a notification socket is configured (the process runs under `Type=notify`).
    public var isActive: Bool { socketName != nil }

    /// Sends `state` (newline-separated `KEY=value` assignments, see sd_notify(3)) as one
    /// datagram. Returns false when inactive or when the send failed; a failed notification
    /// never stops the daemon, so callers may ignore the result.
    @discardableResult
    public func notify(_ state: String) -> Bool {
        guard let socketName else { return false }
        return Self.send(Array(state.utf8), to: socketName)
    }

    /// `READY=1`, with `STATUS=` when given: startup or a reload finished.
    @discardableResult
    public func notifyReady(status: String? = nil) -> Bool {
        notify("READY=1" + Self.statusLine(status))
    }

    /// `RELOADING=1` with `MONOTONIC_USEC=` (CLOCK_MONOTONIC now, in microseconds), as systemd
    /// 253+ requires for `Type=notify-reload`; follow with `notifyReady()` once applied.
    @discardableResult
    public func notifyReloading(status: String? = nil) -> Bool {
        notify("RELOADING=1\nMONOTONIC_USEC=\(Self.monotonicMicroseconds())" + Self.statusLine(status))
    }

    /// `STOPPING=1`, with `STATUS=` when given: shutdown (or a drain before it) began.
    @discardableResult
    public func notifyStopping(status: String? = nil) -> Bool {
        notify("STOPPING=1" + Self.statusLine(status))
    }

    /// `WATCHDOG=1`: the service is alive. Sent only when the watchdog is on for this process.
    @discardableResult
    public func notifyWatchdog() -> Bool {
        guard watchdogInterval != nil else { return false }
        return notify("WATCHDOG=1")
    }

    /// `STATUS=text` alone: free-form status shown by `systemctl status`.
    @discardableResult
    public func notifyStatus(_ text: String) -> Bool {
        notify("STATUS=" + Self.singleLine(text))
    }

    /// CLOCK_MONOTONIC in microseconds, the clock `MONOTONIC_USEC` is read against.
    public static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }

    /// `\nSTATUS=text`, or nothing.
    private static func statusLine(_ status: String?) -> String {
        status.map { "\nSTATUS=" + singleLine($0) } ?? ""
    }

    /// `text` with line breaks turned into spaces: a newline would start a new assignment.
    private static func singleLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }

    /// A filesystem path or an abstract name, short enough for `sun_path`.
    private static func isSupported(_ name: String) -> Bool {
        let bytes = name.utf8.count
        guard name.hasPrefix("/") || name.hasPrefix("@"), bytes >= 2 else { return false }
        // A path needs its terminating NUL; an abstract name swaps '@' for the leading NUL.
        return name.hasPrefix("@") ? bytes <= maximumPathBytes : bytes < maximumPathBytes
    }

    /// `WATCHDOG_USEC` as a duration, unless `WATCHDOG_PID` names another process.
    private static func watchdog(environment: [String: String], processID: pid_t) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 else { return nil }
        if let pidText = environment["WATCHDOG_PID"] {
            guard let pid = pid_t(pidText), pid == processID else { return nil }
        }
        return .microseconds(Int64(clamping: usec))
    }

    /// One `sendto` of `payload` on a fresh non-blocking AF_UNIX datagram socket.
    private static func send(_ payload: [UInt8], to name: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(name.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes.prefix(raw.count))
        }
        // Abstract names are exactly as long as given (no terminator); paths count their NUL.
        let pathLength = pathBytes.first == 0 ? pathBytes.count : pathBytes.count + 1
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + pathLength)
        let sent = payload.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes.baseAddress, bytes.count, sendWithoutSignal, $0, length)
                }
            }
        }
        return sent == payload.count
    }
}
