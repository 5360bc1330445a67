import Glibc

/// Notices that the certificate and key files changed (docs/tls.md, "Renewed certificates"): a
/// renewal by certbot or cert-manager replaces them, and relayd should serve the new ones without
/// a SIGHUP. A file's identity is its device, inode, size and modification time, read through
/// symbolic links, so a Kubernetes Secret volume's update (a new `..data` directory swapped in)
/// counts as a change. A file that cannot be read counts as a change too; the reload then keeps
/// the running certificate and logs why.
struct CertificateWatch {
    struct Identity: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var seconds: Int
        var nanoseconds: Int
    }

    private var seen: [String: Identity?] = [:]

    /// Starts from the files as they are now.
    init(paths: [String]) {
        for path in paths { seen[path] = Self.identity(path) }
    }

    /// Whether any file differs from the last look; remembers what it sees.
    mutating func changed() -> Bool {
        var changed = false
        for path in seen.keys {
            let now = Self.identity(path)
            if now != seen[path] ?? nil {
                seen[path] = now
                changed = true
            }
        }
        return changed
    }

    static func identity(_ path: String) -> Identity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Identity(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
            seconds: info.st_mtim.tv_sec, nanoseconds: info.st_mtim.tv_nsec)
    }
}
