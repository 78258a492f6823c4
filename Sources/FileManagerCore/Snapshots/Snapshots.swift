import Glibc
import SystemPackage

/// One published snapshot, as `snapshot list` shows it.
public struct SnapshotRecord: Sendable, Equatable {
    public var name: String
    /// What was frozen, relative to the mount: `containers/ID[/…]`.
    public var source: String
    public var created: Double
    /// Nil: it never expires.
    public var expires: Double?
    public var files: Int64
    public var bytes: Int64
    /// Who published it (they or root may remove it).
    public var ownerUID: uid_t
}

/// Published snapshots (SPEC §4, docs/DESIGN.md 52): a frozen copy of a container or of an
/// item inside one under `snapshots/NAME`, read-only through the mount. One implementation
/// for the CLI on an unmounted store (under the store lock, `hooks` nil) and the daemon
/// (`hooks` tell the kernel and presenters of the new or removed entry).
///
/// A publish reads the source as a `FileWrapper`, leaving out the bundle, `tmp/`,
/// `Library/Caches/` and items marked `user.containerfs.exclude-from-backup`, writes it into
/// `.staging/`, then renames it into `snapshots/` in one step. Each publish and remove is a
/// row of the `snapshots` table written before it acts (state `publishing`, `removing`):
/// a crash is settled at the next open (`recover`).
public struct Snapshots {
    let store: Store
    let hooks: StoreChangeHooks?

    public init(store: Store, hooks: StoreChangeHooks? = nil) {
        self.store = store
        self.hooks = hooks
    }

    static let schema = """
        CREATE TABLE IF NOT EXISTS snapshots (
            name TEXT PRIMARY KEY NOT NULL,
            source TEXT NOT NULL,
            created REAL NOT NULL,
            expires REAL,
            files INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            owner_uid INTEGER NOT NULL,
            state TEXT NOT NULL
        )
        """

    public static let excludeAttribute = "user.containerfs.exclude-from-backup"

    /// The result of a publish: the record and how data was shared.
    public struct Published: Sendable {
        public var record: SnapshotRecord
        public var warnings: [String]
        /// How file data reached the snapshot: shared extents (FICLONE), links of the live
        /// files (`SnapshotData`), or copies; nil when it holds no file data.
        public var sharing: FileWrapper.DataSharing?
    }

    // MARK: - Publish

    /// Freezes `source` (`containers/ID` or a path below it) as `snapshots/NAME`. `name`
    /// defaults to `ID-YYYY-MM-DDTHH-MM-SS` (UTC), made unique with `.2`, `.3`, …;
    /// `expiresAfter` seconds from now, if given.
    /// `progress` hears the files written so far and how many there are, after each.
    public func publish(_ source: String, name wanted: String? = nil, expiresAfter: Int64? = nil,
                        caller: Caller, top: FilePath? = nil, now: Double = Double(time(nil)),
                        progress: ((_ done: Int64, _ total: Int64) -> Void)? = nil) throws(FileManagerError) -> Published {
        var components = source.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if components.first == "." { components.removeFirst() }
        guard components.count >= 2, components[0] == "containers",
              !components.contains(where: { $0 == "." || $0 == ".." }) else {
            throw .invalidArgument("\(Self.shown(source, top)): not a container or an item inside one (containers/ID[/…])")
        }
        guard let id = BundleIdentifier(components[1]) else { throw .noSuchItem(Self.shown(source, top)) }
        let registry = ContainerRegistry(store: store)
        guard registry.record(id) != nil else { throw .noSuchItem(Self.shown("containers/\(id)", top)) }
        try registry.authorize(caller, id, to: "publish snapshots of it")
        if let wanted { try Self.validate(name: wanted) }
        let relative = components.joined(separator: "/")
        let display = Self.shown(relative, top)

        // The source, opened step by step without following links.
        var dir: CInt
        do { dir = try Syscall.openat(store.rootFD, "containers", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) } catch {
            throw FileManagerError(error, path: display)
        }
        defer { Syscall.close(dir) }
        for component in components.dropFirst().dropLast() {
            let next: CInt
            do { next = try Syscall.openat(dir, component, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) } catch {
                throw FileManagerError(error == .tooManySymbolicLinkLevels ? .notDirectory : error, path: display)
            }
            Syscall.close(dir)
            dir = next
        }
        let last = Array(components[components.count - 1].utf8)
        var warnings: [String] = []
        let wrapper: FileWrapper
        do {
            wrapper = try FileWrapper(directory: dir, name: last, options: FileWrapper.ReadingOptions(
                include: { path, st, fd in
                    Self.included(Self.containerRelative(components, path), st, fd)
                },
                warning: { message in warnings.append(message) }), display: display)
        } catch {
            if case .invalidArgument(let m) = error, m.hasSuffix("left out of the reading") {
                throw .invalidArgument("\(display): excluded from snapshots (the bundle, tmp/, Library/Caches/ or \(Self.excludeAttribute))")
            }
            throw error
        }

        // The name, the journal row, the copy in staging, one rename into place.
        let created = now
        var name = wanted ?? Self.defaultName(id.rawValue, created)
        let base = name
        var attempt = 1
        while (try? Syscall.fstatat(store.snapshotsFD, name)) != nil || exists(name) {
            if wanted != nil { throw .itemExists(Self.shown("snapshots/\(name)", top)) }
            attempt += 1
            name = "\(base).\(attempt)"
        }
        let expires = expiresAfter.map { now + Double($0) }
        var record = SnapshotRecord(name: name, source: relative, created: created, expires: expires,
                                    files: 0, bytes: 0, ownerUID: caller.uid)
        try insert(record, state: "publishing")
        let staged = Array("snapshot.\(getpid()).\(UInt32.random(in: 0...UInt32.max))".utf8)
        var sharing: FileWrapper.DataSharing?
        let data = store.snapshotData, snapshot = name
        do throws(FileManagerError) {
            let totals = try wrapper.writeInPlace(to: store.stagingFD, name: staged, linker: { source, entry throws(Errno) in
                try data.share(source, snapshot: snapshot, entry: entry)
            }, progress: progress.map { tell in
                let total = Int64(wrapper.regularFileCount)
                return { done in tell(Int64(done), total) }
            }, sharing: { sharing = $0 })
            record.files = Int64(totals.files)
            record.bytes = totals.bytes
            try? Syscall.fsync(store.stagingFD, dataOnly: false)
            try update(name, files: record.files, bytes: record.bytes)
            try place(staged, as: name)
        } catch {
            FileWrapper.removeItem(store.stagingFD, staged)
            data.remove(snapshot: name)
            deleteRow(name)
            throw error
        }
        recordManifest(name: name)
        setState(name, "published")
        store.syncDirectory(store.snapshotsFD)
        return Published(record: record, warnings: warnings, sharing: sharing)
    }

    /// `relative` as the user sees it: under the mount point or the store.
    static func shown(_ relative: String, _ top: FilePath?) -> String {
        guard let top else { return relative }
        return top.string + "/" + relative
    }

    /// The path below the container root of an item a reading reports (`path` relative to
    /// the source's top).
    static func containerRelative(_ components: [String], _ path: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        for component in components.dropFirst(2) {
            if !result.isEmpty { result.append(0x2F) }
            result.append(contentsOf: Array(component.utf8))
        }
        if !path.isEmpty {
            if !result.isEmpty { result.append(0x2F) }
            result.append(contentsOf: path)
        }
        return result
    }

    /// Whether a snapshot keeps the item at `path` (below its container's root).
    static func included(_ path: [UInt8], _ st: stat, _ fd: CInt) -> Bool {
        let parts = path.split(separator: 0x2F).map { Array($0) }
        if parts.count == 1, (st.st_mode & S_IFMT) == S_IFDIR, parts[0].count > 4, parts[0].suffix(4) == Array(".app".utf8) { return false }
        if parts.count == 1, parts[0] == Array("tmp".utf8) { return false }
        if parts.count == 2, parts[0] == Array("Library".utf8), parts[1] == Array("Caches".utf8) { return false }
        if (st.st_mode & S_IFMT) != S_IFLNK, let value = ExtendedAttributes.value(fd, Array(excludeAttribute.utf8CString)),
           value == Array("1".utf8) || value == Array("true".utf8) {
            return false
        }
        return true
    }

    /// Moves the finished copy into `snapshots/` in one step, never over anything.
    func place(_ staged: [UInt8], as name: String) throws(FileManagerError) {
        let path = FilePath("snapshots").appending(name)
        do throws(Errno) {
            let rename = { () throws(Errno) -> Void in
                try withCName(staged) { s throws(Errno) in
                    try Syscall.renameat2(store.stagingFD, s, store.snapshotsFD, name, RENAME_NOREPLACE)
                }
            }
            if let hooks, let component = FilePath.Component(name) {
                try hooks.changing(store.snapshotsFD, component, at: path, rename)
                hooks.announce(path, true)
            } else {
                try rename()
            }
        } catch {
            throw FileManagerError(error, path: path.string)
        }
    }

    /// `ID-YYYY-MM-DDTHH-MM-SS`, in UTC: sorts by time within a container.
    public static func defaultName(_ id: String, _ when: Double) -> String {
        var t = time_t(when)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let date = "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))"
        let clock = "T\(two(parts.tm_hour))-\(two(parts.tm_min))-\(two(parts.tm_sec))"
        return id + "-" + date + clock
    }

    /// A name given with `--name`: one path component, not hidden, at most 255 bytes.
    public static func validate(name: String) throws(FileManagerError) {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 255, !bytes.contains(0x2F), !bytes.contains(0), bytes.first != 0x2E else {
            throw .invalidArgument("\(name): not a snapshot name (one path component, not starting with '.', at most 255 bytes)")
        }
    }

    // MARK: - List, remove, expiry

    /// Every published snapshot, oldest first, after removing those whose time has come.
    public func list(now: Double = Double(time(nil))) -> [SnapshotRecord] {
        _ = removeExpired(now: now)
        return records(state: "published")
    }

    /// Removes `name` (its publisher or root).
    public func remove(_ name: String, caller: Caller) throws(FileManagerError) {
        try Self.validate(name: name)
        guard let record = records(state: "published").first(where: { $0.name == name }) else {
            throw .noSuchItem("snapshots/\(name)")
        }
        guard caller.isRoot || caller.uid == record.ownerUID else {
            throw .permissionDenied("snapshots/\(name) (only its publisher or root may remove it)")
        }
        try discard(name)
    }

    /// Removes every snapshot whose expiry time has passed; their names.
    @discardableResult
    public func removeExpired(now: Double = Double(time(nil)), deferred: Bool = false) -> [String] {
        var removed: [String] = []
        for record in records(state: "published") {
            guard let expires = record.expires, expires <= now else { continue }
            if (try? discard(record.name, deferred: deferred)) != nil { removed.append(record.name) }
        }
        return removed
    }

    /// Journaled removal: the row says `removing`, one rename takes the tree out of
    /// `snapshots/` into `.staging/`, where it is deleted; then the row goes.
    /// `deferred`: what was moved into `.staging/` is left there, for the daemon to delete
    /// once it serves (a settling at mount).
    private func discard(_ name: String, deferred: Bool = false) throws(FileManagerError) {
        setState(name, "removing")
        let doomed = "removed-snapshot.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let path = FilePath("snapshots").appending(name)
        do throws(Errno) {
            let rename = { () throws(Errno) -> Void in
                try Syscall.renameat2(store.snapshotsFD, name, store.stagingFD, doomed, RENAME_NOREPLACE)
            }
            if let hooks, let component = FilePath.Component(name) {
                try hooks.changing(store.snapshotsFD, component, at: path, deleting: true, rename)
                hooks.announce(path, false)
            } else {
                try rename()
            }
        } catch .noSuchFileOrDirectory {
            // Gone already.
        } catch {
            setState(name, "published")
            throw FileManagerError(error, path: path.string)
        }
        if !deferred { FileWrapper.removeItem(store.stagingFD, Array(doomed.utf8)) }
        store.snapshotData.remove(snapshot: name, deferred: deferred)
        deleteRow(name)
    }

    /// Settles what a crash cut short (the store is opened with its lock, nothing served
    /// yet): a publish whose rename happened is whole, else its row goes (its copy was in
    /// `.staging/`, cleared at the same open); a removal is finished. Then expired
    /// snapshots go.
    @discardableResult
    static func recover(_ store: Store, now: Double = Double(time(nil)), deferred: Bool = false) -> Int {
        let snapshots = Snapshots(store: store)
        var settled = 0
        for record in snapshots.records(state: "publishing") {
            settled += 1
            if (try? Syscall.fstatat(store.snapshotsFD, record.name)) != nil {
                snapshots.recordManifest(name: record.name)
                snapshots.setState(record.name, "published")
            } else {
                snapshots.deleteRow(record.name)
            }
        }
        for record in snapshots.records(state: "removing") {
            settled += 1
            try? snapshots.discard(record.name, deferred: deferred)
        }
        snapshots.removeExpired(now: now, deferred: deferred)
        store.snapshotData.removeData(except: Set(snapshots.records(state: "published").map(\.name)))
        return settled
    }

    // MARK: - The table

    func exists(_ name: String) -> Bool {
        let rows = (try? store.database.execute("SELECT 1 FROM snapshots WHERE name = ?", [.text(name)])) ?? []
        return !rows.isEmpty
    }

    func insert(_ r: SnapshotRecord, state: String) throws(FileManagerError) {
        let expires: MetadataDatabase.Value = r.expires.map { .real($0) } ?? .null
        do {
            _ = try store.database.execute(
                "INSERT INTO snapshots (name, source, created, expires, files, bytes, owner_uid, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [.text(r.name), .text(r.source), .real(r.created), expires, .int(r.files), .int(r.bytes), .int(Int64(r.ownerUID)), .text(state)])
        } catch {
            throw .system(.ioError, "containerfs.db: the snapshots table cannot be written (\(error))")
        }
    }

    func update(_ name: String, files: Int64, bytes: Int64) throws(FileManagerError) {
        do {
            _ = try store.database.execute("UPDATE snapshots SET files = ?, bytes = ? WHERE name = ?", [.int(files), .int(bytes), .text(name)])
        } catch {
            throw .system(.ioError, "containerfs.db: the snapshots table cannot be written (\(error))")
        }
    }

    func setState(_ name: String, _ state: String) {
        _ = try? store.database.execute("UPDATE snapshots SET state = ? WHERE name = ?", [.text(state), .text(name)])
    }

    func deleteRow(_ name: String) {
        _ = try? store.database.execute("DELETE FROM snapshots WHERE name = ?", [.text(name)])
        _ = try? store.database.execute("DELETE FROM snapshot_manifest WHERE snapshot = ?", [.text(name)])
    }

    func records(state: String) -> [SnapshotRecord] {
        let rows = (try? store.database.execute(
            "SELECT name, source, created, expires, files, bytes, owner_uid FROM snapshots WHERE state = ? ORDER BY created, name",
            [.text(state)])) ?? []
        var result: [SnapshotRecord] = []
        for row in rows {
            guard case .text(let name) = row[0], case .text(let source) = row[1], case .real(let created) = row[2],
                  case .int(let files) = row[4], case .int(let bytes) = row[5], case .int(let owner) = row[6] else { continue }
            var expires: Double?
            if case .real(let e) = row[3] { expires = e }
            result.append(SnapshotRecord(name: name, source: source, created: created, expires: expires,
                                         files: files, bytes: bytes, ownerUID: uid_t(truncatingIfNeeded: owner)))
        }
        return result
    }
}

extension Store {
    /// Settles snapshot operations a crash cut short and removes expired snapshots.
    @discardableResult
    public func settleSnapshots() -> Int { Snapshots.recover(self) }
}
