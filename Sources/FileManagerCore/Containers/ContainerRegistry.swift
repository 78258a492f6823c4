import Glibc
import SystemPackage

/// One container's record in the metadata database.
public struct ContainerRecord: Sendable, Codable, Equatable {
    public var id: String
    public var displayName: String
    public var ownerUID: UInt32
    /// Seconds since 1970.
    public var created: Double
}

/// Creates, lists and removes containers in a store (docs/SEMANTICS.md §1, §2).
///
/// A container becomes visible in one step: it is built under `.staging/`, then renamed into
/// `containers/` with `RENAME_NOREPLACE`; its record is written after. A crash in between
/// leaves either nothing visible, or a directory whose record `reconcile()` restores.
public struct ContainerRegistry: Sendable {
    public let store: Store

    public init(store: Store) { self.store = store }

    /// Builds a container with the standard layout, owned by `caller`: the root 0700, its
    /// directories 0755 (docs/SEMANTICS.md §1.2). `bundleSource` is copied
    /// into the bundle directory; `warning` hears of what the copy left out (FIFOs,
    /// sockets, devices), once the container is made.
    @discardableResult
    public func create(_ id: BundleIdentifier, caller: Caller, bundleSource: FilePath? = nil,
                       warning: (String) -> Void = { _ in }) throws(FileManagerError) -> ContainerRecord {
        let display = "containers/\(id)"
        // Not named after the id: an id may take all 255 bytes of a name.
        let staging = "new.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        do {
            try Credentials.asCaller(caller) { () throws(Errno) in
                try Syscall.mkdirat(store.stagingFD, staging, 0o700)
            }
        } catch {
            throw FileManagerError(error, path: display)
        }
        var warnings: [String] = []
        do {
            let root = try Syscall.openat(store.stagingFD, staging, O_PATH | O_DIRECTORY | O_NOFOLLOW)
            defer { Syscall.close(root) }
            try Credentials.asCaller(caller) { () throws(Errno) in
                for (_, relative) in LayoutDirectory.relativePaths(bundleName: id.bundleDirectoryName) {
                    try Syscall.mkdirat(root, relative, 0o755)
                    try Syscall.fchmodat(root, relative, 0o755)
                }
                try Syscall.fchmod(pathDescriptor: root, 0o700)
            }
            if let bundleSource {
                // Read with the caller's own permissions: the daemon must never copy in a host
                // file its client could not read (DESIGN.md, decision 6).
                warnings = try Credentials.withAccessChecks { () throws(FileManagerError) in
                    try installBundle(from: bundleSource, into: root, as: FilePath(display).appending(id.bundleDirectoryName),
                                      caller: caller)
                }
            }
            try Syscall.renameat2(store.stagingFD, staging, store.containersFD, id.rawValue, RENAME_NOREPLACE)
            // Acknowledged means durable (docs/SEMANTICS.md §6): the new entry reaches the disk first.
            store.syncDirectory(store.containersFD)
        } catch let error as FileManagerError {
            try? TreeRemoval.remove(store.stagingFD, staging)
            throw error
        } catch let error as Errno {
            try? TreeRemoval.remove(store.stagingFD, staging)
            throw error == .fileExists ? existing(id) : FileManagerError(error, path: display)
        } catch {
            try? TreeRemoval.remove(store.stagingFD, staging)
            throw .system(.ioError, display)
        }
        let record = ContainerRecord(id: id.rawValue, displayName: id.displayName, ownerUID: caller.uid,
                                     created: Double(time(nil)))
        try? insert(record)
        warnings.forEach(warning)
        return record
    }

    /// Copies the directory `source` names into the new container's bundle directory,
    /// `destination` (`containers/ID/NAME.app`, for messages); returns a warning for each item
    /// left out. A link given as `source` is followed, as `cp -rH` follows a link named on
    /// its command line (the user named what it leads to; the bundle itself must be a real,
    /// read-only directory); links inside the bundle are copied as links, never followed.
    /// Errors name the item inside the bundle that failed.
    private func installBundle(from source: FilePath, into root: CInt, as destination: FilePath,
                               caller: Caller) throws(FileManagerError) -> [String] {
        let sourceFD: CInt
        do {
            sourceFD = try Credentials.asCaller(caller) { () throws(Errno) in
                try source.withName { p throws(Errno) in try Syscall.open(p, O_RDONLY | O_DIRECTORY | O_NONBLOCK) }
            }
        } catch {
            throw FileManagerError(error, path: source.string)
        }
        defer { Syscall.close(sourceFD) }
        var options = TreeCopy.Options()
        let storeDirectories = storeAndAbove()
        options.checkDirectory = { [store] st, path throws(FileManagerError) in
            guard storeDirectories.contains(FileIdentity(st)) else { return }
            throw .invalidArgument("\(path): the bundle contains the store \(store.path) and would be copied into itself")
        }
        var warnings: [String] = []
        var hooks = TreeHooks()
        hooks.skipped = { path, type in
            warnings.append("\(path): not copied (\(Self.kindName(type)); a bundle holds only files, directories and symbolic links)")
        }
        guard let name = destination.lastComponent else { throw .invalidArgument(destination.string) }
        // The layout made an empty bundle directory; the copy replaces it.
        do { try name.withName { n throws(Errno) in try Syscall.unlinkat(root, n, AT_REMOVEDIR) } } catch {
            throw FileManagerError(error, path: destination.string)
        }
        // From the opened directory itself (its entry ".") and named as the user named it.
        _ = try Credentials.asCaller(caller) { () throws(FileManagerError) in
            try TreeCopy.copy(from: sourceFD, ".", at: source, to: root, name, at: destination, options: options, hooks: hooks)
        }
        return warnings
    }

    /// The store's staging directory, the store, and every directory above it up to `/`: a
    /// bundle that is one of them, or meets one inside (a bind mount), would copy the
    /// container being built into itself. Walked by the daemon's own rights, by `..` from the
    /// store's descriptors (mount points crossed as the kernel crosses them).
    private func storeAndAbove() -> Set<FileIdentity> { Set(FileIdentity.ancestry(of: store.stagingFD)) }

    /// How a warning names an item a bundle copy left out.
    private static func kindName(_ type: mode_t) -> String {
        switch type {
        case S_IFIFO: return "a FIFO"
        case S_IFSOCK: return "a socket"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        default: return "a special file"
        }
    }

    /// The error for a create whose id is taken: a container, or a stray entry that is none
    /// (a link or file planted in the store, which the mount does not show and reconcile
    /// never takes as a container), named with the way to clear it.
    private func existing(_ id: BundleIdentifier) -> FileManagerError {
        guard let st = try? id.rawValue.withCString({ p throws(Errno) in try Syscall.fstatat(store.containersFD, p) }),
              (st.st_mode & S_IFMT) != S_IFDIR else { return .itemExists("containers/\(id)") }
        let what = (st.st_mode & S_IFMT) == S_IFLNK ? "a symbolic link" : "a file"
        return .itemExists("\(store.path.appending("containers/\(id)")): \(what), not a container, holds this id in the store (`containerfs container remove \(id)` removes it)")
    }

    private func insert(_ r: ContainerRecord) throws {
        try store.database.execute(
            "INSERT OR REPLACE INTO containers (id, display_name, owner_uid, created) VALUES (?, ?, ?, ?)",
            [.text(r.id), .text(r.displayName), .int(Int64(r.ownerUID)), .real(r.created)])
    }

    /// Every container, sorted by id.
    public func list() -> [ContainerRecord] {
        let rows = (try? store.database.execute("SELECT id, display_name, owner_uid, created FROM containers ORDER BY id")) ?? []
        return rows.compactMap { row in
            guard case .text(let id) = row[0], case .text(let name) = row[1], case .int(let uid) = row[2] else { return nil }
            var created = 0.0
            if case .real(let c) = row[3] { created = c }
            return ContainerRecord(id: id, displayName: name, ownerUID: UInt32(uid), created: created)
        }
    }

    public func record(_ id: BundleIdentifier) -> ContainerRecord? {
        list().first { $0.id == id.rawValue }
    }

    /// Who may remove `id`: its container's owner, or the owner of a stray entry holding the
    /// id in `containers/` (a link or file planted in the store, which is no container but
    /// would keep the id from ever being used); nil when there is neither.
    public func owner(of id: BundleIdentifier) -> uid_t? {
        if let record = record(id) { return record.ownerUID }
        guard let st = try? id.rawValue.withCString({ p throws(Errno) in try Syscall.fstatat(store.containersFD, p) }),
              (st.st_mode & S_IFMT) != S_IFDIR else { return nil }
        return st.st_uid
    }

    /// Deletes a container and everything in it (docs/SEMANTICS.md §2 `container remove --permanently`).
    /// The directory is first renamed into `.staging/` so that it disappears in one step;
    /// a crash during the recursive delete leaves only staging debris. A stray entry under
    /// the id (see `owner(of:)`) goes the same way: the rename and the removal act on the
    /// entry itself, never on what a link leads to.
    public func remove(_ id: BundleIdentifier) throws(FileManagerError) {
        let display = "containers/\(id)"
        let doomed = "removed.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        do {
            try Syscall.renameat2(store.containersFD, id.rawValue, store.stagingFD, doomed, RENAME_NOREPLACE)
        } catch {
            throw FileManagerError(error, path: display)
        }
        _ = try? store.database.execute("DELETE FROM containers WHERE id = ?", [.text(id.rawValue)])
        do { try TreeRemoval.remove(store.stagingFD, doomed) } catch { throw FileManagerError(error, path: display) }
    }

    /// Makes the database agree with `containers/`: a directory without a record gets one
    /// (owner from the directory), a record without a directory goes.
    public func reconcile() {
        guard let stream = try? DirectoryStream.open(store.containersFD), let names = try? stream.allNames() else { return }
        var present = Set<String>()
        for name in names {
            guard let id = BundleIdentifier(name.string) else { continue }
            // Only real directories are containers: a symlink planted in the store is ignored.
            guard let st = try? name.withName({ p throws(Errno) in try Syscall.fstatat(store.containersFD, p) }),
                  (st.st_mode & S_IFMT) == S_IFDIR else { continue }
            present.insert(id.rawValue)
            guard record(id) == nil else { continue }
            try? insert(ContainerRecord(id: id.rawValue, displayName: id.displayName, ownerUID: st.st_uid,
                                        created: Double(st.st_mtim.tv_sec)))
        }
        for r in list() where !present.contains(r.id) {
            _ = try? store.database.execute("DELETE FROM containers WHERE id = ?", [.text(r.id)])
        }
    }

    /// Purges every container's `tmp/` of entries not modified for `age` seconds (docs/SEMANTICS.md §1:
    /// at mount, items older than 3 days; nothing is open then). Returns how many items went.
    @discardableResult
    public func purgeTemporaryItems(olderThan age: Double) -> Int {
        (try? purge(nil, areas: .tmp, caller: Caller(uid: 0, gid: 0), olderThan: age))?.items ?? 0
    }
}
