import Glibc
import SystemPackage

extension CoreFileManager {
    // MARK: - Existence

    /// `fileExistsAtPath:` (docs/SEMANTICS.md §8.7). A final symlink is followed, so a
    /// dangling link does not exist. False as well when existence cannot be determined: a
    /// relative path (`~/x` included: the core never expands `~`), a parent the caller cannot
    /// search.
    public func fileExists(atPath path: FilePath, caller: Caller = .current) -> Bool {
        var isDirectory = false
        return fileExists(atPath: path, isDirectory: &isDirectory, caller: caller)
    }

    /// `fileExistsAtPath:isDirectory:`: `isDirectory` is true for a directory or a link to
    /// one, and left unchanged when the answer is false .
    public func fileExists(atPath path: FilePath, isDirectory: inout Bool, caller: Caller = .current) -> Bool {
        guard let st = Self.statFollowing(path, caller: caller) else { return false }
        isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
        return true
    }

    // MARK: - Access

    /// `isReadableFileAtPath:` : "appears to be" readable by the caller's real ids.
    /// Follows a final symlink; false if anything is missing or a parent is not searchable.
    public func isReadableFile(atPath path: FilePath, caller: Caller = .current) -> Bool {
        Self.mayAccess(path, R_OK, caller: caller)
    }

    /// `isWritableFileAtPath:` ; like `isReadableFile`. A read-only file system
    /// answers false.
    public func isWritableFile(atPath path: FilePath, caller: Caller = .current) -> Bool {
        Self.mayAccess(path, W_OK, caller: caller)
    }

    /// `isExecutableFileAtPath:` ; like `isReadableFile`. For root, true only when
    /// some execute bit is set (or for a directory), as the kernel decides.
    public func isExecutableFile(atPath path: FilePath, caller: Caller = .current) -> Bool {
        Self.mayAccess(path, X_OK, caller: caller)
    }

    /// `isDeletableFileAtPath:` , by the Linux rule so that it predicts `unlink(2)`:
    /// write and search on the parent, and in a sticky parent ownership of the item or the
    /// parent (root exempt). A directory is deletable only if everything inside it is, and
    /// its non-empty levels are readable (they must be listed). A final symlink is not
    /// followed; a parent the caller cannot search, or a read-only file system, gives false.
    public func isDeletableFile(atPath path: FilePath, caller: Caller = .current) -> Bool {
        guard path.isAbsolute, let last = path.lastComponent, last.kind == .regular else { return false }
        let check = AccessCheck(caller)
        guard check.canSearchParents(of: path) else { return false }
        return (try? Self.withParent(of: path) { dir, name throws(FileManagerError) in
            try Self.attempt(path) { () throws(Errno) in
                let parent = try Syscall.fstat(dir)
                let item = try Self.lstat(dir, name)
                if try Syscall.fstatvfs(dir).f_flag & UInt(ST_RDONLY) != 0 { return false }
                guard check.mayUnlink(item, from: parent) else { return false }
                guard (item.st_mode & S_IFMT) == S_IFDIR else { return true }
                let fd = try Self.open(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW)
                defer { Syscall.close(fd) }
                return try Self.contentsDeletable(fd, item, check: check)
            }
        }) ?? false
    }

    /// Whether every entry of the directory behind `dir` (described by `st`) may go.
    private static func contentsDeletable(_ dir: CInt, _ st: stat, check: AccessCheck) throws(Errno) -> Bool {
        let stream = try DirectoryStream.open(dir)
        let names = try stream.allNames()
        if names.isEmpty { return true }
        guard check.permits(R_OK | X_OK, st) else { return false }
        for name in names {
            let child = try lstat(stream.fd, name)
            guard check.mayUnlink(child, from: st) else { return false }
            if (child.st_mode & S_IFMT) == S_IFDIR {
                let fd = try open(stream.fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW)
                defer { Syscall.close(fd) }
                guard try contentsDeletable(fd, child, check: check) else { return false }
            }
        }
        return true
    }

    // MARK: - Helpers

    /// Whether the kernel can answer for `caller` directly: it is this process, whose real
    /// ids `faccessat` checks (with supplementary groups and ACLs).
    static func isThisProcess(_ caller: Caller) -> Bool {
        caller.uid == getuid() && caller.gid == getgid()
    }

    /// `stat` following a final link, as `caller` sees it: nil if it fails or a parent is
    /// not searchable by the caller.
    static func statFollowing(_ path: FilePath, caller: Caller) -> stat? {
        guard path.isAbsolute else { return nil }
        let st = try? Credentials.asCaller(caller) { () throws(FileManagerError) in
            try withParent(of: path) { dir, name throws(FileManagerError) in
                try attempt(path) { () throws(Errno) in try name.withName { p throws(Errno) in try Syscall.fstatat(dir, p, 0) } }
            }
        }
        guard let st else { return nil }
        if !isThisProcess(caller) && !AccessCheck(caller).canSearchParents(of: path) { return nil }
        return st
    }

    /// The access checks: the kernel for this process, mode bits for another caller.
    static func mayAccess(_ path: FilePath, _ mode: CInt, caller: Caller) -> Bool {
        guard path.isAbsolute, !path.isEmpty else { return false }
        if isThisProcess(caller) {
            return (try? path.withName { p throws(Errno) in try Syscall.faccessat(AT_FDCWD, p, mode, 0) }) != nil
        }
        guard let st = statFollowing(path, caller: caller), AccessCheck(caller).permits(mode, st) else { return false }
        if mode & W_OK != 0 {
            var sv = statvfs()
            let readOnly = path.withPlatformString { statvfs($0, &sv) == 0 && sv.f_flag & UInt(ST_RDONLY) != 0 }
            if readOnly { return false }
        }
        return true
    }
}
