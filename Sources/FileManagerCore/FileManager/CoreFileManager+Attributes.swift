import CLinux
import Glibc
import SystemPackage

extension CoreFileManager {
    // MARK: - Reading

    /// `attributesOfItemAtPath:` (docs/SEMANTICS.md §8.8): lstat semantics, a symlink
    /// describes itself.
    public func attributesOfItem(atPath path: FilePath, caller: Caller = .current) throws(FileManagerError) -> FileAttributes {
        try Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: path) { dir, name throws(FileManagerError) in
                try Self.attempt(path) { () throws(Errno) in
                    let fd = try Self.open(dir, name, O_PATH | O_NOFOLLOW)
                    defer { Syscall.close(fd) }
                    return Self.attributes(of: fd, try Syscall.fstat(fd))
                }
            }
        }
    }

    /// The attributes of the item behind `fd` (an `O_PATH` descriptor is fine), `st` its stat.
    static func attributes(of fd: CInt, _ st: stat) -> FileAttributes {
        // user.* xattrs cannot exist on a symlink; reading through /proc would not reach it.
        let isSymlink = (st.st_mode & S_IFMT) == S_IFLNK
        let hidden = !isSymlink && AttributeXattr.text(fd, AttributeXattr.extensionHidden) == "1"
        return FileAttributes(st, creationDate: AttributeXattr.creationDate(fd), extensionHidden: hidden)
    }

    /// `attributesOfFileSystemForPath:` (docs/SEMANTICS.md §8.8; keys docs/SEMANTICS.md §8.9). A final symlink is
    /// not followed: the link's own file system answers.
    public func attributesOfFileSystem(forPath path: FilePath, caller: Caller = .current) throws(FileManagerError) -> FileSystemAttributes {
        try Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: path) { dir, name throws(FileManagerError) in
                try Self.attempt(path) { () throws(Errno) in
                    let fd = try Self.open(dir, name, O_PATH | O_NOFOLLOW)
                    defer { Syscall.close(fd) }
                    let sv = try Syscall.fstatvfs(fd)
                    let st = try Syscall.fstat(fd)
                    let unit = UInt64(sv.f_frsize)
                    return FileSystemAttributes(size: UInt64(sv.f_blocks) * unit, freeSize: UInt64(sv.f_bavail) * unit,
                                                nodes: UInt64(sv.f_files), freeNodes: UInt64(sv.f_ffree),
                                                systemNumber: UInt64(st.st_dev))
                }
            }
        }
    }

    /// `destinationOfSymbolicLinkAtPath:` (docs/SEMANTICS.md §8.6): the target as stored, bytes
    /// unchanged, a relative target unresolved. Not a link: `invalidArgument`.
    public func destinationOfSymbolicLink(atPath path: FilePath, caller: Caller = .current) throws(FileManagerError) -> FilePath {
        try Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: path) { dir, name throws(FileManagerError) in
                try Self.attempt(path) { () throws(Errno) in
                    let fd = try Self.open(dir, name, O_PATH | O_NOFOLLOW)
                    defer { Syscall.close(fd) }
                    // readlink of an empty path says ENOENT for a non-link; the answer is EINVAL.
                    guard (try Syscall.fstat(fd).st_mode & S_IFMT) == S_IFLNK else { throw .invalidArgument }
                    var target = try Syscall.readlink(pathDescriptor: fd)
                    target.append(0)
                    return target.withUnsafeBufferPointer { b in
                        FilePath(platformString: UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self))
                    }
                }
            }
        }
    }

    // MARK: - Writing

    /// `setAttributes:ofItemAtPath:` (docs/SEMANTICS.md §8.8). A final symlink *is* followed. Every
    /// change is tried, in the order owner and group, mode (Linux's chown clears setuid),
    /// the xattr-kept keys, modification time last; the first failure is thrown afterwards,
    /// and the changes that worked stay (no rollback).
    public func setAttributes(_ changes: FileAttributeChanges, ofItemAtPath path: FilePath, caller: Caller = .current) throws(FileManagerError) {
        try Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: path) { dir, name throws(FileManagerError) in
                let fd = try Self.attempt(path) { () throws(Errno) in try Self.open(dir, name, O_PATH) }
                defer { Syscall.close(fd) }
                try Self.apply(changes, to: fd, isSymlink: false, path: path)
            }
        }
    }

    /// Applies `changes` to the item behind `fd` in `setAttributes`' order, trying every
    /// change and throwing the first failure, named after `path`.
    static func apply(_ changes: FileAttributeChanges, to fd: CInt, isSymlink: Bool, path: FilePath) throws(FileManagerError) {
        var first: Errno?
        func attempt(_ body: () throws(Errno) -> Void) {
            do { try body() } catch { if first == nil { first = error } }
        }
        if changes.ownerAccountID != nil || changes.groupOwnerAccountID != nil {
            // -1 leaves that id alone.
            attempt { () throws(Errno) in
                try Syscall.fchown(pathDescriptor: fd, changes.ownerAccountID ?? uid_t.max, changes.groupOwnerAccountID ?? gid_t.max)
            }
        }
        if let mode = changes.posixPermissions {
            attempt { () throws(Errno) in
                if isSymlink { throw .notSupported }  // Linux symlinks have no mode of their own
                try Syscall.fchmod(pathDescriptor: fd, mode & 0o7777)
            }
        }
        if let hidden = changes.extensionHidden {
            attempt { () throws(Errno) in
                if hidden { try AttributeXattr.set(fd, AttributeXattr.extensionHidden, "1") } else {
                    try AttributeXattr.remove(fd, AttributeXattr.extensionHidden)
                }
            }
        }
        if let date = changes.creationDate {
            attempt { () throws(Errno) in try AttributeXattr.set(fd, AttributeXattr.creationDate, date.description) }
        }
        if let date = changes.modificationDate {
            attempt { () throws(Errno) in
                var times = (timespec(tv_sec: 0, tv_nsec: UTIME_OMIT), date.timespec)
                try withUnsafePointer(to: &times) { p throws(Errno) in
                    try Syscall.utimens(pathDescriptor: fd, isSymlink: isSymlink, UnsafeRawPointer(p).assumingMemoryBound(to: timespec.self))
                }
            }
        }
        if let first { throw FileManagerError(first, path: path.string) }
    }

    // MARK: - Display

    /// `displayNameAtPath:` (docs/SEMANTICS.md §8.8): the last component, without its extension
    /// when `extensionHidden` is set; no localization. Nothing at the path (or any error):
    /// `path` itself, unchanged.
    public func displayName(atPath path: FilePath, caller: Caller = .current) -> String {
        guard let attributes = try? attributesOfItem(atPath: path, caller: caller) else { return path.string }
        guard let last = path.lastComponent else { return path.string }
        return attributes.extensionHidden ? last.stem : last.string
    }

    /// `componentsToDisplayForPath:` (docs/SEMANTICS.md §8.8): the display names of the path's
    /// components, the last one as `displayName` gives it; nil if nothing is at the path.
    public func componentsToDisplay(forPath path: FilePath, caller: Caller = .current) -> [String]? {
        guard (try? attributesOfItem(atPath: path, caller: caller)) != nil else { return nil }
        var names = path.components.map(\.string)
        if !names.isEmpty { names[names.count - 1] = displayName(atPath: path, caller: caller) }
        return names
    }
}
