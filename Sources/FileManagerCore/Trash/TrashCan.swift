import Glibc
import SystemPackage

/// Where the trash's operations act: through a live mount (its root holds `containers/`
/// and the `.Trash-UID` directories), or in the store (`containers/`, `trash/`).
public struct TrashPlace: Sendable {
    /// The directory holding `containers/`.
    public let top: CInt
    /// The directory holding the `.Trash-UID` directories.
    public let trashes: CInt
    /// `top` and `trashes` as a user sees them (messages, resulting paths).
    public let topDisplay: FilePath
    public let trashesDisplay: FilePath

    /// The store itself (no live mount, or the daemon's changes behind the kernel's back).
    public init(store: Store) {
        (top, trashes) = (store.rootFD, store.trashFD)
        (topDisplay, trashesDisplay) = (store.path, store.path.appending("trash"))
    }

    /// A live mount, whose root `root` (a descriptor the caller keeps open) is `mountPoint`.
    public init(mountRoot root: CInt, mountPoint: FilePath) {
        (top, trashes) = (root, root)
        (topDisplay, trashesDisplay) = (mountPoint, mountPoint)
    }
}

/// An item moved to the trash.
public struct TrashedItem: Sendable {
    /// Its name in `files/` (it may differ from the original name).
    public let name: [UInt8]
    /// Where it is now, as a user sees it.
    public let path: FilePath
}

/// One item of a user's trash, as `trash list` shows it.
public struct TrashEntry: Sendable {
    public let name: [UInt8]
    /// Nil when the info file is missing or unusable (`problem` says why).
    public let info: TrashInfo?
    public let problem: String?
    public let size: Int64
    public let isDirectory: Bool
}

/// trashItemAtURL and the rest of a user's trash, in the FreeDesktop.org format
/// (docs/SEMANTICS.md, docs/DESIGN.md 48-51): trash, list, restore, empty. One
/// implementation for every caller: the CLI without a live mount (on the store, under the
/// store lock), and the daemon for CLI commands while mounted.
///
/// While mounted, an item's moves go through the mount itself (`items` is the mount), as
/// the caller: the kernel sees them happen, the mount's policy and coordination apply
/// (presenters hear `didMove`), and nothing is left for the store watcher to guess. A
/// container's root, which the mount never lets move, is moved in the store by the daemon,
/// published through `hooks` (`StoreChangeHooks`: coordinated, the kernel told).
///
/// Every operation is journaled (`TrashJournal`): a crash leaves nothing half-done once the
/// store is opened again.
public struct TrashCan {
    let items: TrashPlace
    let store: Store
    /// Set while a mount is live: the store is then changed only through them.
    let hooks: StoreChangeHooks?
    let uid: uid_t
    /// Whose rights the moves through `items` are made with (nil: the process's own).
    let caller: Caller?
    let journal: TrashJournal

    public init(items: TrashPlace, store: Store, hooks: StoreChangeHooks? = nil, uid: uid_t, caller: Caller? = nil) {
        self.items = items
        self.store = store
        self.hooks = hooks
        self.uid = uid
        self.caller = caller
        journal = TrashJournal(database: store.database)
    }

    /// Runs `body` with the caller's rights, capabilities dropped: the kernel checks them
    /// at every step through the mount, as for the caller's own system calls.
    private func asCaller<R>(_ body: () throws(FileManagerError) -> R) throws(FileManagerError) -> R {
        guard let caller else { return try body() }
        return try Credentials.withAccessChecks { () throws(FileManagerError) -> R in try Credentials.asCaller(caller, body) }
    }

    private func display(_ relative: [UInt8]) -> String {
        "\(items.topDisplay.string)/\(Bytes.display(relative))"
    }

    private func openTrash(creating: Bool) throws(FileManagerError) -> TrashDirectory {
        try asCaller { () throws(FileManagerError) in
            try TrashDirectory(parent: items.trashes, uid: uid, creating: creating, display: items.trashesDisplay, hooks: nil)
        }
    }

    /// The store's own trash directory of the user, for the moves of a container's root.
    private func storeTrash() throws(FileManagerError) -> TrashDirectory {
        try TrashDirectory(store: store, uid: uid, creating: hooks == nil, hooks: hooks)
    }

    // MARK: - Trash

    /// Moves the item at `path` (relative to the mount root: `containers/ID/…`) to the trash
    /// and returns where it went. `containers/ID` itself moves the whole container, as one
    /// item restorable as a container: only its owner or root may, and not while a program
    /// `run` started for it is alive, unless `force`.
    public func trash(_ path: [UInt8], force: Bool = false) throws(FileManagerError) -> TrashedItem {
        let components = try TrashPath.components(path, display: display(path))
        if components.count == 2 { return try trashContainer(components[1], force: force) }
        let last = components[components.count - 1]
        let parent = try asCaller { () throws(FileManagerError) in
            try TrashPath.openDirectory(items.top, components.dropLast(), creating: false, display: display(path))
        }
        defer { Syscall.close(parent) }
        let st: stat
        do { st = try withCName(last) { p throws(Errno) in try Syscall.fstatat(parent, p) } } catch {
            throw FileManagerError(error, path: display(path))
        }
        let (parentZone, itemZone) = TrashPath.zones(components, isDirectory: (st.st_mode & S_IFMT) == S_IFDIR)
        do {
            try withCName(last) { p throws(Errno) in
                try Zone.checkRename(item: itemZone, from: parentZone, to: .trash, replacing: nil, newName: p, exchange: false)
            }
        } catch {
            throw TrashPath.refusal(error, display(path), what: "moved to the trash")
        }
        let trash = try openTrash(creating: true)
        return try move(path, from: parent, last, into: trash)
    }

    /// The whole container `id`, moved in the store (the mount lets no container root move).
    private func trashContainer(_ name: [UInt8], force: Bool) throws(FileManagerError) -> TrashedItem {
        var path: [UInt8] = Array("containers/".utf8)
        path.append(contentsOf: name)
        guard let id = BundleIdentifier(String(decoding: name, as: UTF8.self)) else { throw .noSuchItem(display(path)) }
        // The daemon moves it with its own rights: who may is decided here, not by the kernel.
        try ContainerRegistry(store: store).checkRemovable(id, by: caller ?? .current, force: force, shown: display(path))
        guard let st = try? withCName(name, { p throws(Errno) in try Syscall.fstatat(store.containersFD, p) }),
              (st.st_mode & S_IFMT) == S_IFDIR else { throw .noSuchItem(display(path)) }
        // Made through the mount first, as the caller, when one is live: the kernel sees it.
        _ = try openTrash(creating: true)
        let trash = try storeTrash()
        let moved = try move(path, from: store.containersFD, name, into: trash, daemonRights: true)
        ContainerRegistry(store: store).reconcile()
        return TrashedItem(name: moved.name, path: items.trashesDisplay.appending(".Trash-\(uid)/files").appending(Bytes.display(moved.name)))
    }

    /// The journaled move of `name` in `parent` (the item at `path`) into `trash`: an info
    /// file reserves a free name, then one rename moves the item (the specification's order).
    /// `daemonRights`: the rename is the daemon's (a container's root, whose parent only the
    /// store's owner may change; who may was checked before), not the caller's.
    private func move(_ path: [UInt8], from parent: CInt, _ name: [UInt8], into trash: TrashDirectory,
                      daemonRights: Bool = false) throws(FileManagerError) -> TrashedItem {
        let id = try journal.begin(.trash, uid: uid, name: name, path: path)
        defer { journal.end(id) }
        let info = TrashInfo(path: path, deletionDate: time(nil))
        let reserved = try asCaller { () throws(FileManagerError) in try trash.reserve(for: name, info) { journal.rename(id, to: $0) } }
        let rename = { () throws(FileManagerError) in
            do throws(Errno) {
                try trash.change(parent, name, in: nil, at: FilePath(Bytes.display(path)), removing: true) { p throws(Errno) in
                    try trash.change(trash.files, reserved, in: "files") { q throws(Errno) in
                        try Syscall.renameat2(parent, p, trash.files, q, RENAME_NOREPLACE)
                    }
                }
            } catch {
                throw TrashPath.refusal(error, display(path), what: "moved to the trash")
            }
        }
        do throws(FileManagerError) {
            if daemonRights { try rename() } else { try asCaller(rename) }
        } catch {
            trash.removeInfo(reserved)
            throw error
        }
        return TrashedItem(name: reserved, path: trash.display.appending("files").appending(Bytes.display(reserved)))
    }

    // MARK: - List

    /// The user's trash: every info file with its item, and what is unusable, with why.
    public func list() throws(FileManagerError) -> [TrashEntry] {
        let trash: TrashDirectory
        do { trash = try openTrash(creating: false) } catch .noSuchItem { return [] }
        return try asCaller { () throws(FileManagerError) in
            var entries: [TrashEntry] = []
            var sizes = trash.directorySizes()
            var sizesChanged = false
            var infoNames = Set<[UInt8]>()
            for file in Self.names(trash.info) { if let name = TrashNaming.trashName(ofInfo: file) { infoNames.insert(name) } }
            var seen = Set<[UInt8]>()
            for name in infoNames.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                seen.insert(name)
                let st = try? withCName(name) { p throws(Errno) in try Syscall.fstatat(trash.files, p) }
                let parsed = trash.infoFile(name)
                var problem: String?
                if case .failure(let e) = parsed { problem = e.description }
                guard let st else {
                    entries.append(TrashEntry(name: name, info: try? parsed.get(), problem: problem ?? "no item in files/ for this info file",
                                              size: 0, isDirectory: false))
                    continue
                }
                let isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
                var size = Int64(st.st_size)
                if isDirectory {
                    var infoTime: Int64 = 0
                    if let st = try? withCName(TrashNaming.infoName(name), { p throws(Errno) in try Syscall.fstatat(trash.info, p) }) {
                        infoTime = Int64(st.st_mtim.tv_sec)
                    }
                    if let cached = sizes[name], cached.mtime == infoTime {
                        size = cached.size
                    } else {
                        size = withCName(name) { (p: UnsafePointer<CChar>) -> Int64 in Self.treeSize(trash.files, p) }
                        sizes[name] = (size, infoTime)
                        sizesChanged = true
                    }
                }
                entries.append(TrashEntry(name: name, info: try? parsed.get(), problem: problem, size: size, isDirectory: isDirectory))
            }
            for name in Self.names(trash.files) where !seen.contains(name) {
                entries.append(TrashEntry(name: name, info: nil, problem: "no info file for this item", size: 0, isDirectory: false))
            }
            // The cache keeps only trashed directories (the specification's directorysizes).
            for name in sizes.keys where !infoNames.contains(name) { sizes[name] = nil; sizesChanged = true }
            if sizesChanged { trash.writeDirectorySizes(sizes) }
            return entries
        }
    }

    static func names(_ dir: CInt) -> [[UInt8]] {
        guard let stream = try? DirectoryStream.open(dir), let names = try? stream.allNames() else { return [] }
        return names.map(Bytes.of)
    }

    /// Bytes in the files below `name` of `dir` (their sizes, as `du --apparent-size`).
    static func treeSize(_ dir: CInt, _ name: UnsafePointer<CChar>) -> Int64 {
        guard let st = try? Syscall.fstatat(dir, name) else { return 0 }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return Int64(st.st_size) }
        guard let fd = try? Syscall.openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW) else { return 0 }
        defer { Syscall.close(fd) }
        var total: Int64 = 0
        for child in names(fd) { total += withCName(child) { (p: UnsafePointer<CChar>) -> Int64 in treeSize(fd, p) } }
        return total
    }

    // MARK: - Restore

    /// Puts the trashed item `name` back where it was, or at `destination` (relative to the
    /// mount root; an existing directory there receives it under its original name).
    /// Never overwrites. Missing directories on the way back are made again, but only
    /// inside the original container; a container restores as a container.
    public func restore(_ name: [UInt8], to destination: [UInt8]? = nil) throws(FileManagerError) -> FilePath {
        let trash = try openTrash(creating: false)
        let shownItem = "\(trash.display)/files/\(Bytes.display(name))"
        let info = try trash.infoFile(name).get()
        let st: stat
        do throws(Errno) {
            st = try withCName(name) { p throws(Errno) in try Syscall.fstatat(trash.files, p) }
        } catch {
            if error == .noSuchFileOrDirectory {
                throw FileManagerError.noSuchItem("\(shownItem) (its info file names no item in files/: nothing to restore)")
            }
            throw FileManagerError(error, path: shownItem)
        }
        let isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
        var target = destination ?? info.path
        var components = try TrashPath.components(target, display: display(target))
        if destination != nil, components.count > 2, let existing = try? asCaller({ () throws(FileManagerError) in
            try TrashPath.openDirectory(items.top, components[...], creating: false, display: display(target))
        }) {
            Syscall.close(existing)
            var original: [UInt8] = name
            if let last = info.path.split(separator: 0x2F).last { original = Array(last) }
            target.append(0x2F)
            target.append(contentsOf: original)
            components.append(original)
        }
        if components.count == 2 {
            guard isDirectory else { throw .invalidArgument("\(display(target)): only a directory restores as a container") }
            return try restoreContainer(name, as: components[1], trash: trash)
        }
        let last = components[components.count - 1]
        let (parentZone, _) = TrashPath.zones(components, isDirectory: isDirectory)
        do {
            try withCName(last) { p throws(Errno) in
                try Zone.checkRename(item: .trash, from: .trash, to: parentZone, replacing: nil, newName: p, exchange: false)
            }
        } catch {
            throw TrashPath.refusal(error, display(target), what: "restored there")
        }
        let id = try journal.begin(.restore, uid: uid, name: name, path: target)
        defer { journal.end(id) }
        try asCaller { () throws(FileManagerError) in
            let parent = try TrashPath.openDirectory(items.top, components.dropLast(), creating: destination == nil, display: display(target))
            defer { Syscall.close(parent) }
            do throws(Errno) {
                try withCName(name) { p throws(Errno) in
                    try withCName(last) { q throws(Errno) in try Syscall.renameat2(trash.files, p, parent, q, RENAME_NOREPLACE) }
                }
            } catch .fileExists {
                throw .itemExists("\(display(target)) (restore never overwrites: move it away, or restore with --to)")
            } catch {
                throw TrashPath.refusal(error, display(target), what: "restored there")
            }
            trash.removeInfo(name)
        }
        if isDirectory { trash.forgetDirectorySizes([name]) }
        return FilePath(display(target))
    }

    /// A trashed container, back under `containers/` (moved in the store, see `trash`).
    private func restoreContainer(_ name: [UInt8], as idName: [UInt8], trash: TrashDirectory) throws(FileManagerError) -> FilePath {
        var target: [UInt8] = Array("containers/".utf8)
        target.append(contentsOf: idName)
        guard BundleIdentifier(String(decoding: idName, as: UTF8.self)) != nil else {
            throw .invalidArgument("\(display(target)): not a valid bundle identifier")
        }
        let storeSide = try storeTrash()
        let id = try journal.begin(.restore, uid: uid, name: name, path: target)
        defer { journal.end(id) }
        do {
            try storeSide.change(storeSide.files, name, in: "files", removing: true) { p throws(Errno) in
                try storeSide.change(store.containersFD, idName, in: nil, at: FilePath(Bytes.display(target))) { q throws(Errno) in
                    try Syscall.renameat2(storeSide.files, p, store.containersFD, q, RENAME_NOREPLACE)
                }
            }
        } catch .fileExists {
            throw .itemExists("\(display(target)) (a container with this id exists: restore never overwrites)")
        } catch {
            throw FileManagerError(error, path: display(target))
        }
        storeSide.removeInfo(name)
        trash.forgetDirectorySizes([name])
        ContainerRegistry(store: store).reconcile()
        return FilePath(display(target))
    }

    // MARK: - Empty

    /// What `empty` did.
    public struct Emptied: Sendable {
        public var removed: [[UInt8]] = []
        public var bytes: Int64 = 0
        /// Items that could not be removed, each with its reason.
        public var failures: [FileManagerError] = []
    }

    /// Deletes trashed items for good: `names` (all when nil), those trashed at least
    /// `olderThan` seconds ago when given. Each vanishes from `files/` in one step (moved
    /// to `expunged/` first), then is deleted.
    public func empty(_ names: [[UInt8]]? = nil, olderThan: Int64? = nil) throws(FileManagerError) -> Emptied {
        let trash: TrashDirectory
        do { trash = try openTrash(creating: false) } catch .noSuchItem {
            if let first = names?.first { throw .noSuchItem("\(items.trashesDisplay)/.Trash-\(uid)/files/\(Bytes.display(first))") }
            return Emptied()
        }
        var chosen: [[UInt8]]
        var all = Set<[UInt8]>(Self.names(trash.files))
        for file in Self.names(trash.info) { if let name = TrashNaming.trashName(ofInfo: file) { all.insert(name) } }
        if let names {
            for name in names where !all.contains(name) {
                throw .noSuchItem("\(trash.display)/files/\(Bytes.display(name)) (no such item in the trash)")
            }
            chosen = names
        } else {
            chosen = all.sorted { $0.lexicographicallyPrecedes($1) }
        }
        if let olderThan {
            let cutoff = Int64(time(nil)) - olderThan
            chosen = chosen.filter { (name: [UInt8]) -> Bool in
                guard let info = trash.readInfo(name) else { return false }
                return Int64(info.deletionDate) <= cutoff
            }
        }
        var outcome = Emptied()
        for name in chosen {
            let size: Int64 = withCName(name) { (p: UnsafePointer<CChar>) -> Int64 in Self.treeSize(trash.files, p) }
            do {
                let id = try journal.begin(.empty, uid: uid, name: name, path: trash.readInfo(name)?.path ?? [])
                defer { journal.end(id) }
                try asCaller { () throws(FileManagerError) in
                    let expunged = try trash.expunged()
                    defer { Syscall.close(expunged) }
                    let aside = Array("\(id)".utf8)
                    do throws(Errno) {
                        try withCName(name) { p throws(Errno) in
                            try withCName(aside) { q throws(Errno) in try Syscall.renameat2(trash.files, p, expunged, q, RENAME_NOREPLACE) }
                        }
                    } catch .noSuchFileOrDirectory {
                        // An info file without its item: only the info file goes.
                    } catch {
                        throw FileManagerError(error, path: "\(trash.display)/files/\(Bytes.display(name))")
                    }
                    trash.removeInfo(name)
                    if (try? withCName(aside) { p throws(Errno) in try Syscall.fstatat(expunged, p) }) != nil {
                        do throws(Errno) { try withCName(aside) { p throws(Errno) in try TreeRemoval.remove(expunged, p) } } catch {
                            throw FileManagerError(error, path: "\(trash.display)/expunged/\(id) (what was \(Bytes.display(name)))")
                        }
                    }
                }
                outcome.removed.append(name)
                outcome.bytes += size
            } catch {
                outcome.failures.append(error)
            }
        }
        trash.forgetDirectorySizes(outcome.removed)
        return outcome
    }
}

/// Paths relative to the mount root, as trash operations take them, and the policy on them.
enum TrashPath {
    /// `path`'s components; only items in a container (or a container itself) qualify.
    static func components(_ path: [UInt8], display: String) throws(FileManagerError) -> [[UInt8]] {
        let parts = path.split(separator: 0x2F).map(Array.init)
        for c in parts where TrashInfo.isUnsafeComponent(c[...]) {
            throw .invalidArgument("\(display): '.' and '..' are not allowed in a trash path")
        }
        if parts.first == Array("snapshots".utf8) { throw .readOnlyVolume(display) }
        guard parts.count >= 2, parts[0] == Array("containers".utf8) else {
            throw .invalidArgument("\(display): not an item in a container (only items of containers/ID/ go to the trash)")
        }
        return parts
    }

    /// Opens the directory `components` lead to from `top`, never through a link; with
    /// `creating`, directories missing below `containers/ID/` are made (mode 0755).
    static func openDirectory(_ top: CInt, _ components: ArraySlice<[UInt8]>, creating: Bool, display: String) throws(FileManagerError) -> CInt {
        var dir = top
        var shown = ""
        for (index, c) in components.enumerated() {
            if !shown.isEmpty { shown.append("/") }
            shown.append(Bytes.display(c))
            do {
                let next: CInt
                do {
                    next = try withCName(c) { p throws(Errno) in try Syscall.openat(dir, p, O_PATH | O_DIRECTORY | O_NOFOLLOW) }
                } catch .noSuchFileOrDirectory where creating && index >= 2 {
                    try withCName(c) { p throws(Errno) in try Syscall.mkdirat(dir, p, 0o755) }
                    next = try withCName(c) { p throws(Errno) in try Syscall.openat(dir, p, O_PATH | O_DIRECTORY | O_NOFOLLOW) }
                }
                if dir != top { Syscall.close(dir) }
                dir = next
            } catch {
                if dir != top { Syscall.close(dir) }
                if index == 1 && error == .noSuchFileOrDirectory {
                    throw .noSuchItem("\(shown) (the container is gone: restore it from the trash first, or restore with --to)")
                }
                if error == .tooManySymbolicLinkLevels || error == .notDirectory {
                    throw .notADirectory("\(shown) (a link or a file is on the way: the trash never follows links)")
                }
                throw FileManagerError(error, path: display)
            }
        }
        return dir
    }

    /// The zones of the parent and of the item at `components` (the mount's policy).
    static func zones(_ components: [[UInt8]], isDirectory: Bool) -> (parent: Zone, item: Zone) {
        var zone = Zone.root, parent = Zone.root
        for (index, c) in components.enumerated() {
            parent = zone
            let directory: Bool = index < components.count - 1 || isDirectory
            let current = zone
            zone = withCName(c) { (p: UnsafePointer<CChar>) -> Zone in current.child(named: p, isDirectory: directory, key: 0) }
        }
        return (parent, zone)
    }

    /// The error for a refused move of `display`.
    static func refusal(_ error: Errno, _ display: String, what: String) -> FileManagerError {
        switch error {
        case .readOnlyFileSystem: return .readOnlyVolume(display)
        case .permissionDenied: return .permissionDenied("\(display) (it cannot be \(what): a standard directory, or Inbox, or not yours)")
        default: return FileManagerError(error, path: display)
        }
    }
}

extension ContainerRegistry {
    /// `container remove`: the container goes to `trash` as one item (its path there is
    /// returned), or with `permanently` is deleted. Refused while a program `run` started
    /// for it is alive, unless `force`. Only its owner or root may remove it.
    public func remove(_ id: BundleIdentifier, permanently: Bool, force: Bool, caller: Caller,
                       trash: TrashCan) throws(FileManagerError) -> FilePath? {
        let shown = "containers/\(id)"
        if permanently || record(id) == nil {  // a stray entry under the id is no container to keep
            try checkRemovable(id, by: caller, force: force, shown: shown)
            try remove(id)
            return nil
        }
        // Ownership first, named as the command names it; the trash checks again, and for a
        // run still alive, naming the item as it names every item it moves.
        try checkRemovable(id, by: caller, force: true, shown: shown)
        return try trash.trash(Array(shown.utf8), force: force).path
    }

    /// Whether `caller` may remove the container `id` (shown as `shown` in errors): its
    /// owner or root, and unless `force`, not while a program `run` started for it lives.
    func checkRemovable(_ id: BundleIdentifier, by caller: Caller, force: Bool, shown: String) throws(FileManagerError) {
        guard let owner = owner(of: id) else { throw .noSuchItem(shown) }
        guard caller.isRoot || caller.uid == owner else { throw .permissionDenied(shown) }
        if !force && !runningPrograms(of: id).isEmpty {
            throw .busy("\(shown) (a program started by `containerfs run` for it is still running; --force removes it anyway)")
        }
    }
}
