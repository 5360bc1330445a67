import Glibc

extension ConfigAdvisor {
    /// What is wrong with `state-dir` for the user that runs the check (docs/state-journal.md):
    /// a directory that cannot be made or written, or one others may read (its journals hold
    /// key material). A missing directory whose parent is writable is made at start.
    static func stateDirWarning(_ config: RelayConfiguration) -> String? {
        guard let path = config.stateDir else { return nil }
        var info = stat()
        guard stat(path, &info) == 0 else {
            let parent = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            let parentPath = parent.isEmpty ? (path.hasPrefix("/") ? "/" : ".") : parent
            if access(parentPath, W_OK | X_OK) == 0 { return nil }
            return "state-dir \(path) does not exist and cannot be created here: UDP allocations will not survive a crash"
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            return "state-dir \(path) is not a directory: UDP allocations will not survive a crash"
        }
        guard access(path, W_OK | X_OK) == 0 else {
            return "state-dir \(path) is not writable by this user: UDP allocations will not survive a crash"
        }
        if info.st_mode & 0o077 != 0 {
            return "state-dir \(path) is open to other users (mode \(String(info.st_mode & 0o777, radix: 8))): "
                + "its journals hold keys, chmod 700 it"
        }
        return nil
    }
}
