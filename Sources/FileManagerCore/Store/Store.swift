import Foundation
import Glibc
import SystemPackage

/// The backing directory (docs/SEMANTICS.md §6):
///
///     STORE/
///     ├── containerfs.db      metadata (SQLite, WAL)
///     ├── .lock               held (flock) by the one daemon serving the store
///     ├── .staging/           half-built items; crash debris goes once a daemon serves
///     ├── containers/ID/      one directory per container
///     ├── snapshots/NAME/     published snapshots
///     ├── .snapshot-data/NAME/  links of live files whose data a snapshot shares
///     └── trash/.Trash-UID/   the volume's FreeDesktop.org trash, one per user
///
/// Every directory above is opened once as an `O_PATH` descriptor; nothing below is ever
/// reached by a path string again.
public final class Store: Sendable {
    public let path: FilePath
    public let rootFD: CInt
    /// `path` as the kernel resolves it, no symbolic link in it: what SQLite is given (its
    /// NOFOLLOW refuses a link anywhere in a path, and a store may lie under one, a home
    /// under a linked /home), and what backing paths read from /proc begin with.
    public let resolvedPath: FilePath
    public let containersFD: CInt
    public let snapshotsFD: CInt
    public let trashFD: CInt
    public let stagingFD: CInt
    /// The device all items must live on: a mount point inside the store is never crossed.
    public let device: UInt64
    public let database: MetadataDatabase
    /// Data snapshots share with live files (`.snapshot-data/`, docs/DESIGN.md 58).
    public let snapshotData: SnapshotData

    public static let defaultPath: FilePath = {
        if let data = getenv("XDG_DATA_HOME"), data.pointee != 0 {
            return FilePath(String(cString: data)).appending("containerfs")
        }
        let home = getenv("HOME").map { String(cString: $0) } ?? "/root"
        return FilePath(home).appending(".local/share/containerfs")
    }()

    /// What is at a path a command was given as its store.
    public enum Found: Equatable, Sendable {
        /// A store: a directory holding `containerfs.db`.
        case store
        /// Nothing (the last component, or a directory on the way, is missing).
        case missing
        /// A directory with nothing in it (but perhaps `lost+found`, or what an interrupted
        /// making of a store left, `leftByMaking`): a store may be made there.
        case emptyDirectory
        /// A directory with other things in it.
        case otherDirectory
        /// Something that is not a directory.
        case notADirectory
        /// The path cannot be looked at (permission, I/O).
        case unreadable(Errno)
    }

    /// What a directory may hold and still be room for a new store: nothing, or what an
    /// interrupted making of one left — its own directories, empty, and its lock and log
    /// files, no database (`leftByMaking`).
    static let roomDirectories: Set<String> = ["containers", "snapshots", "trash", ".staging"]
    static let roomFiles: Set<String> = [".lock", "daemon.log", "containerfs.db-wal", "containerfs.db-shm", "containerfs.db-journal"]
    /// The database and the files SQLite opens beside it by path, in WAL mode.
    static let databaseFiles = ["containerfs.db", "containerfs.db-wal", "containerfs.db-shm"]

    /// Whether the entry `name` of `path` is one an interrupted making of a store left.
    private static func leftByMaking(_ path: FilePath, _ name: String) -> Bool {
        if name == "." || name == ".." || name == "lost+found" { return true }
        var st = stat()
        guard Glibc.lstat(path.appending(name).string, &st) == 0 else { return false }
        if roomFiles.contains(name) { return st.st_mode & S_IFMT == S_IFREG }
        guard roomDirectories.contains(name), st.st_mode & S_IFMT == S_IFDIR else { return false }
        return (try? FileManager.default.contentsOfDirectory(atPath: path.appending(name).string))?.isEmpty == true
    }

    /// Looks at `path` without changing anything. A store is recognised by its database
    /// alone: every store ever opened has one, and no other program's directory is likely to.
    public static func find(at path: FilePath) -> Found {
        var st = stat()
        guard fstatat(AT_FDCWD, path.string, &st, 0) == 0 else {
            let e = Errno(rawValue: Glibc.errno)
            return e == .noSuchFileOrDirectory ? .missing : e == .notDirectory ? .notADirectory : .unreadable(e)
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return .notADirectory }
        if Glibc.lstat(path.appending("containerfs.db").string, &st) == 0 { return .store }
        guard let dir = opendir(path.string) else { return .unreadable(Errno(rawValue: Glibc.errno)) }
        defer { closedir(dir) }
        // Room for a store: nothing there but what making one left, if that stopped before
        // the database (which a failed open used to leave, and nothing could then finish).
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if !Store.leftByMaking(path, name) { return .otherDirectory }
        }
        return .emptyDirectory
    }

    /// Opens the store at `path`. With `create`, makes it first: the missing directories of
    /// the path, the store's own directories and database. Without, nothing is made or
    /// changed: a path that is not a store yet (no `containerfs.db`) fails with ENOENT.
    public init(at path: FilePath, create: Bool = true) throws(FileManagerError) {
        let absolute = path.isAbsolute ? path : FilePath(Store.currentDirectory()).pushing(path)
        self.path = absolute.lexicallyNormalized()
        let display = self.path.string
        if create {
            do { try Store.makeDirectories(self.path) } catch { throw .system(error, display) }
        } else {
            switch Store.find(at: self.path) {
            case .store: break
            case .notADirectory: throw .system(.notDirectory, display)
            case .unreadable(let e): throw .system(e, display)
            default: throw .system(.noSuchFileOrDirectory, "\(display)/containerfs.db")
            }
        }
        // The store itself: searchable by everyone (the control socket lives in it), listable
        // and writable only by its owner.
        var own = stat()
        if create, Glibc.lstat(display, &own) == 0, own.st_uid == geteuid(),
           (own.st_mode & S_IFMT) == S_IFDIR, own.st_mode & 0o7777 == 0o755 {
            _ = Glibc.chmod(display, 0o711)
        }
        // Errors here are the system's own (`.system`): the core's domain cases would say,
        // for a store on a read-only file system, "read-only (bundle or snapshot)".
        do {
            rootFD = try self.path.withName { p throws(Errno) in try Syscall.open(p, O_PATH | O_DIRECTORY) }
        } catch {
            throw .system(error, display)
        }
        var name = ""
        do {
            let st = try Syscall.fstat(rootFD)
            device = UInt64(st.st_dev)
            // Only the daemon writes here; users create containers through it (the mount
            // reports the directory as 01777, see `Volume.attributes`). A world-writable
            // directory in the store would let users plant symlinks the daemon then walks.
            name = "containers"
            containersFD = try Store.subdirectory(rootFD, name, create: create, mode: 0o755)
            name = "snapshots"
            snapshotsFD = try Store.subdirectory(rootFD, name, create: create, mode: 0o755)
            name = "trash"
            trashFD = try Store.subdirectory(rootFD, name, create: create, mode: 0o755)
            name = ".staging"
            stagingFD = try Store.subdirectory(rootFD, name, create: create, mode: 0o700)
            snapshotData = SnapshotData(rootFD: rootFD, stagingFD: stagingFD)
        } catch {
            throw .system(error, name.isEmpty ? display : "\(display)/\(name)")
        }
        let databasePath = self.path.appending("containerfs.db").string
        resolvedPath = Store.resolvedPath(of: rootFD).map { FilePath($0) } ?? self.path
        let resolvedDatabasePath = resolvedPath.appending("containerfs.db").string
        try Store.refuseRootsOwnFiles(rootFD, display)
        do {
            database = try Store.asOwner(of: rootFD) { () throws -> MetadataDatabase in try MetadataDatabase(path: resolvedDatabasePath) }
        } catch {
            // SQLite says only "unable to open": name the link, if that is what stopped it.
            for name in Store.databaseFiles {
                if let st = try? Syscall.fstatat(rootFD, name), st.st_mode & S_IFMT == S_IFLNK {
                    throw .system(.tooManySymbolicLinkLevels, "\(display)/\(name)")
                }
            }
            throw Store.databaseFailure(databasePath, error)
        }
    }

    /// The directory `fd` is open on, as the kernel resolved it: no symbolic link in it. Nil
    /// unless that path leads to the very directory now (not one deleted or out of reach:
    /// the kernel then adds " (deleted)" or gives no absolute path).
    static func resolvedPath(of fd: CInt) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/fd/\(fd)", &buffer, Int(PATH_MAX))
        guard n > 0, buffer[0] == 0x2F else { return nil }
        let path = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var there = stat()
        guard let here = try? Syscall.fstat(fd), Glibc.lstat(path, &there) == 0,
              there.st_dev == here.st_dev, there.st_ino == here.st_ino else { return nil }
        return path
    }

    /// Why the database cannot be opened, in the system's words where there are any:
    /// SQLite says "attempt to write a readonly database" for a store of another user's.
    private static func databaseFailure(_ path: String, _ error: any Error) -> FileManagerError {
        var st = stat()
        if Glibc.access(path, R_OK | W_OK) != 0 {
            let e = Errno(rawValue: Glibc.errno)
            if e == .permissionDenied, Glibc.lstat(path, &st) == 0, st.st_uid != geteuid() {
                return .system(e, "\(path) (it belongs to uid \(st.st_uid); without a live mount only its owner can use the store)")
            }
            return .system(e, path)
        }
        return .system(.ioError, "\(path): \(error)")
    }

    deinit {
        for fd in [rootFD, containersFD, snapshotsFD, trashFD, stagingFD] { Syscall.close(fd) }
    }

    /// Runs `body`, which opens files of the store by path (its database, the daemon's log),
    /// as the store's owner when root works on a store it does not own: with that user's fs
    /// ids and without root's capabilities, so that a link the owner planted there (say
    /// `containerfs.db-wal -> /etc/shadow`) leads nowhere its owner could not write anyway.
    public func asOwner<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        try Store.asOwner(of: rootFD, body)
    }

    /// Opens one of the store's own files (its lock, the daemon's log) by name in the
    /// store's directory, never through a link, and as its owner (`asOwner`): root once
    /// wrote its lock and log into whatever file the store's owner had linked there.
    public func openOwnFile(_ name: String, _ flags: CInt, mode: mode_t = 0o640) throws(Errno) -> CInt {
        try asOwner { () throws(Errno) -> CInt in try Syscall.openat(rootFD, name, flags | O_NOFOLLOW, mode) }
    }

    /// The store's own files that root made in a store another user owns (an older version
    /// opened them as root, or root made the store and gave it away) cannot be opened as
    /// the owner (`asOwner`). The lock and the log hold nothing worth keeping: such a one is
    /// removed, which the owner could do too, and made again as the owner. The database is
    /// not handed over: any root-owned file the owner moved into the store under its name
    /// would be (a secret root wrote elsewhere in a directory of the owner's); the open
    /// fails, saying whose the file is and what to do.
    static func refuseRootsOwnFiles(_ rootFD: CInt, _ display: String) throws(FileManagerError) {
        guard Credentials.canSwitch, let root = try? Syscall.fstat(rootFD), root.st_uid != 0 else { return }
        for name in [".lock", "daemon.log"] {
            guard let st = try? Syscall.fstatat(rootFD, name), st.st_uid == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
            // Not a lock a running daemon holds (an older one, serving the store as root):
            // a lock made again beside it would let a second daemon serve the store.
            if name == ".lock" {
                guard let fd = try? Syscall.openat(rootFD, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK) else { continue }
                defer { Syscall.close(fd) }
                guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { continue }
            }
            _ = unlinkat(rootFD, name, 0)
        }
        for name in Store.databaseFiles {
            if let st = try? Syscall.fstatat(rootFD, name), st.st_uid == 0 {
                throw .system(.permissionDenied, "\(display)/\(name) (it belongs to uid 0, in a store uid \(root.st_uid) owns, made so by an older ContainerFS: if it is this store's, `chown \(root.st_uid):\(root.st_gid) \(display)/containerfs.db*`)")
            }
        }
    }

    static func asOwner<R, E: Error>(of rootFD: CInt, _ body: () throws(E) -> R) throws(E) -> R {
        guard Credentials.canSwitch, let st = try? Syscall.fstat(rootFD), st.st_uid != 0 else { return try body() }
        return try Credentials.withAccessChecks { () throws(E) -> R in
            try Credentials.asCaller(Caller(uid: st.st_uid, gid: st.st_gid)) { () throws(E) -> R in try body() }
        }
    }

    /// Opens one of the store's own directories: never a symlink. With `create`, makes it if
    /// needed, with exactly `mode` (mkdir applies the umask; an older store may have looser
    /// modes); without, changes nothing.
    private static func subdirectory(_ dir: CInt, _ name: String, create: Bool, mode: mode_t) throws(Errno) -> CInt {
        if create {
            do { try Syscall.mkdirat(dir, name, mode) } catch .fileExists {}
        }
        let fd = try Syscall.openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW)
        if create, let st = try? Syscall.fstat(fd), st.st_uid == geteuid(), st.st_mode & 0o7777 != mode {
            try? Syscall.fchmod(pathDescriptor: fd, mode)
        }
        return fd
    }

    private static func makeDirectories(_ path: FilePath) throws(Errno) {
        var prefix = FilePath("/")
        for component in path.components {
            prefix.append(component)
            do {
                _ = try prefix.withName { p throws(Errno) in try Syscall.check { Glibc.mkdir(p, 0o755) } }
            } catch .fileExists {
                continue
            }
        }
    }

    static func currentDirectory() -> String {
        guard let cwd = getcwd(nil, 0) else { return "/" }
        defer { free(cwd) }
        return String(cString: cwd)
    }

    // MARK: - The store lock

    /// Takes the store's exclusive lock, or fails naming who holds it. Held until `release`.
    /// The lock file records the holder's pid and mount point for that message.
    public func acquireLock(mountPoint: String?) throws(FileManagerError) -> StoreLock {
        let fd: CInt
        do {
            fd = try openOwnFile(".lock", O_RDWR | O_CREAT, mode: 0o644)
        } catch {
            throw FileManagerError(error, path: path.appending(".lock").string)
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            // A daemon whose mount is already gone is on its way out (a plain `umount`
            // returns before the daemon exits): give it a moment rather than fail.
            var held = true
            for _ in 0..<60 where !Store.holderStillMounted(Store.readLockHolder(fd)) {
                usleep(50_000)
                if flock(fd, LOCK_EX | LOCK_NB) == 0 { held = false; break }
            }
            if held {
                let holder = Store.readLockHolder(fd)
                Syscall.close(fd)
                throw .busy("\(path.string): store is already in use\(holder.map { " (\($0))" } ?? "")")
            }
        }
        let text = "pid \(getpid())\(mountPoint.map { ", mounted at \($0)" } ?? "")\n"
        _ = ftruncate(fd, 0)
        _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        return StoreLock(fd: fd)
    }

    /// Who holds the lock, as recorded in the lock file, if anyone does.
    public func lockHolder() -> String? {
        guard let fd = try? openOwnFile(".lock", O_RDONLY) else { return nil }
        defer { Syscall.close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 { flock(fd, LOCK_UN); return nil }
        return Store.readLockHolder(fd) ?? "locked"
    }

    /// Whether the mount point a lock holder recorded is still a ContainerFS mount (true
    /// when that cannot be told).
    public static func holderStillMounted(_ holder: String?) -> Bool {
        guard let holder, let range = holder.range(of: "mounted at ") else { return true }
        let mountPoint = String(holder[range.upperBound...])
        guard let mounts = MountTable.read() else { return true }
        return mounts.contains { $0.mountPoint == mountPoint }
    }

    private static func readLockHolder(_ fd: CInt) -> String? {
        var buf = [UInt8](repeating: 0, count: 512)
        let n = buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 511, 0) }
        guard n > 0 else { return nil }
        let s = String(decoding: buf[0..<n], as: UTF8.self).trimmingCharacters(in: "\n")
        return s.isEmpty ? nil : s
    }

    /// fsync of one of the store's directories (after an entry appeared or vanished in it).
    public func syncDirectory(_ dir: CInt) {
        guard let fd = try? Syscall.openat(dir, ".", O_RDONLY | O_DIRECTORY) else { return }
        _ = try? Syscall.fsync(fd, dataOnly: false)
        Syscall.close(fd)
    }

    /// What is in `.staging/` now: debris of a run that ended, or of a settled operation.
    /// A daemon takes the list before it serves and removes exactly those items once the
    /// mount is live (`removeFromStaging`): a tree of thousands of files must not hold up
    /// the mount, and the names it makes itself (each with its pid) are never among them.
    public func stagingDebris() -> [FilePath.Component] {
        (try? DirectoryStream.open(stagingFD).allNames()) ?? []
    }

    public func removeFromStaging(_ names: [FilePath.Component]) {
        for name in names { name.withPlatformString { FileWrapper.removeItem(stagingFD, $0) } }
    }

}

/// The held store lock; released when dropped (or when the process dies).
public final class StoreLock: Sendable {
    let fd: CInt
    init(fd: CInt) { self.fd = fd }
    deinit { Syscall.close(fd) }
}

extension String {
    func trimmingCharacters(in set: Character) -> String {
        var s = Substring(self)
        while s.first == set { s = s.dropFirst() }
        while s.last == set { s = s.dropLast() }
        return String(s)
    }
}
