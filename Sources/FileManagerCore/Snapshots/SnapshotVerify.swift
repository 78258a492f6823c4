import Glibc
import SystemPackage

/// What a snapshot's files looked like in the store when it was published (or imported),
/// and `snapshot verify`: which snapshots were changed since behind the daemon's back
/// (docs/DESIGN.md 55). Through the mount a snapshot is read-only; only edits made directly
/// in the store can change one, and those leave a trace in `stat`: size, mode, owner,
/// modification time, inode number, and the change time (which no caller can set) for
/// in-place edits that put the modification time back.
extension Snapshots {
    static let manifestSchema = """
        CREATE TABLE IF NOT EXISTS snapshot_manifest (
            snapshot TEXT PRIMARY KEY NOT NULL,
            entries TEXT NOT NULL
        )
        """

    /// One item of a manifest, as `stat` saw it in the store.
    public struct ManifestEntry: Sendable, Equatable {
        public var type: mode_t
        public var mode: mode_t
        public var uid: uid_t
        public var gid: gid_t
        public var size: Int64
        public var mtimeNanoseconds: Int64
        public var ctimeNanoseconds: Int64
        public var inode: UInt64
        public var linkCount: UInt64

        init(_ st: stat) {
            type = st.st_mode & S_IFMT
            mode = st.st_mode & 0o7777
            uid = st.st_uid
            gid = st.st_gid
            // A directory's size is the file system's business, not the snapshot's.
            size = type == S_IFDIR ? 0 : Int64(st.st_size)
            mtimeNanoseconds = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            ctimeNanoseconds = Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec)
            inode = UInt64(st.st_ino)
            linkCount = UInt64(st.st_nlink)
        }

        /// The data a placeholder's link holds (`SnapshotData`): its size and modification
        /// time only. The link is the live file's inode until its first change through the
        /// mount, whose names, mode, owner and change time the mount may change meanwhile;
        /// its data and modification time it changes only after copying them aside.
        init(data st: stat) {
            self.init(st)
            (mode, uid, gid, ctimeNanoseconds, inode, linkCount) = (0, 0, 0, 0, 0, 0)
        }

        init?(_ fields: [Substring]) {
            guard fields.count == 9, let t = mode_t(fields[0], radix: 8), let m = mode_t(fields[1], radix: 8),
                  let u = uid_t(fields[2]), let g = gid_t(fields[3]), let s = Int64(fields[4]), let mt = Int64(fields[5]),
                  let ct = Int64(fields[6]), let i = UInt64(fields[7]), let n = UInt64(fields[8]) else { return nil }
            (type, mode, uid, gid, size, mtimeNanoseconds, ctimeNanoseconds, inode, linkCount) = (t, m, u, g, s, mt, ct, i, n)
        }

        var line: String {
            let parts: [String] = [String(type, radix: 8), String(mode, radix: 8), "\(uid)", "\(gid)", "\(size)",
                                   "\(mtimeNanoseconds)", "\(ctimeNanoseconds)", "\(inode)", "\(linkCount)"]
            return parts.joined(separator: " ")
        }

        /// What differs from `now`, by name. The change time counts only while the link count
        /// is the same: publishing and the mount's copy-up add and remove names of shared
        /// files, which moves their change time without touching what they hold.
        func differences(_ now: ManifestEntry) -> [String] {
            var what: [String] = []
            if type != now.type { what.append("type") }
            if inode != now.inode { what.append("inode") }
            if size != now.size { what.append("size") }
            if mode != now.mode { what.append("mode") }
            if uid != now.uid || gid != now.gid { what.append("owner") }
            if mtimeNanoseconds != now.mtimeNanoseconds { what.append("mtime") }
            if ctimeNanoseconds != now.ctimeNanoseconds, linkCount == now.linkCount {
                what.append("ctime")
            }
            return what
        }
    }

    /// Records what `snapshots/NAME` holds now as its manifest (replacing any): called once
    /// it is in place, by publish, import and the recovery of a publish. Best effort: a
    /// snapshot without a manifest is reported as unverifiable, never as damaged.
    public func recordManifest(name: String) {
        guard let entries = try? scan(name) else { return }
        var text = ""
        for (path, entry) in entries.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            text += String(decoding: TrashInfo.percentEncoded(path), as: UTF8.self) + " " + entry.line + "\n"
        }
        _ = try? store.database.execute("INSERT OR REPLACE INTO snapshot_manifest (snapshot, entries) VALUES (?, ?)",
                                        [.text(name), .text(text)])
    }

    /// The manifest recorded for `name`, nil when there is none.
    func manifest(_ name: String) -> [[UInt8]: ManifestEntry]? {
        guard let rows = try? store.database.execute("SELECT entries FROM snapshot_manifest WHERE snapshot = ?", [.text(name)]),
              let row = rows.first, case .text(let text) = row[0] else { return nil }
        var result: [[UInt8]: ManifestEntry] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count == 10, let path = TrashInfo.percentDecoded(Array(fields[0].utf8)[...]),
                  let entry = ManifestEntry(Array(fields[1...])) else { return nil }
            result[path] = entry
        }
        return result
    }

    /// Every item of `name` in `dir` by its path below it (the top is the empty path),
    /// never following links.
    /// A regular file whose data is linked (`SnapshotData`) has that data as a second entry,
    /// under its path and a NUL byte.
    func scan(_ name: String) throws(Errno) -> [[UInt8]: ManifestEntry] {
        var result: [[UInt8]: ManifestEntry] = [:]
        let top = try Syscall.openat(store.snapshotsFD, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)
        defer { Syscall.close(top) }
        try Self.scan(top, path: [], into: &result) { entry in
            guard let fd = store.snapshotData.openLinked(snapshot: name, entry: entry) else { return nil }
            defer { Syscall.close(fd) }
            return try? Syscall.fstat(fd)
        }
        return result
    }

    private static func scan(_ fd: CInt, path: [UInt8], into result: inout [[UInt8]: ManifestEntry],
                             data: (UInt64) -> stat?) throws(Errno) {
        let st = try Syscall.fstat(fd)
        result[path] = ManifestEntry(st)
        if st.st_mode & S_IFMT == S_IFREG, let linked = data(UInt64(st.st_ino)) {
            result[path + [0]] = ManifestEntry(data: linked)
        }
        guard st.st_mode & S_IFMT == S_IFDIR else { return }
        for component in try DirectoryStream.open(fd).allNames() {
            let child = component.withPlatformString { p in Array(UnsafeRawBufferPointer(start: p, count: strlen(p))) }
            let childFD = try withCName(child) { p throws(Errno) in try Syscall.openat(fd, p, O_PATH | O_NOFOLLOW | O_CLOEXEC) }
            defer { Syscall.close(childFD) }
            var childPath = path
            if !childPath.isEmpty { childPath.append(0x2F) }
            childPath.append(contentsOf: child)
            try scan(childFD, path: childPath, into: &result, data: data)
        }
    }

    /// One snapshot's verdict.
    public struct Verification: Sendable, Equatable {
        public enum State: String, Sendable { case intact, damaged, unverifiable }
        public var name: String
        public var state: State
        /// `PATH: what` for each difference, in path order (`.` is the snapshot's root).
        public var changes: [String]
    }

    /// Compares each published snapshot (or only `name`) with its manifest; in name order.
    public func verify(_ name: String? = nil) throws(FileManagerError) -> [Verification] {
        var records = records(state: "published")
        if let name {
            try Self.validate(name: name)
            records = records.filter { $0.name == name }
            if records.isEmpty { throw .noSuchItem("snapshots/\(name)") }
        }
        return records.map(\.name).sorted().map(verification)
    }

    /// Whether `name` no longer matches its manifest (false when it has none).
    public func isDamaged(_ name: String) -> Bool { verification(name).state == .damaged }

    func verification(_ name: String) -> Verification {
        guard let recorded = manifest(name) else { return Verification(name: name, state: .unverifiable, changes: []) }
        guard let now = try? scan(name) else {
            return Verification(name: name, state: .damaged, changes: [".: missing from the store"])
        }
        var changes: [(path: [UInt8], text: String)] = []
        func shown(_ path: [UInt8]) -> String {
            if path.last == 0 { return Bytes.display(Array(path.dropLast())) + " (its data)" }
            return path.isEmpty ? "." : Bytes.display(path)
        }
        for (path, entry) in recorded {
            guard let current = now[path] else {
                changes.append((path, "\(shown(path)): removed"))
                continue
            }
            let what = entry.differences(current)
            if !what.isEmpty { changes.append((path, "\(shown(path)): changed (\(what.joined(separator: ", ")))")) }
        }
        for path in now.keys where recorded[path] == nil { changes.append((path, "\(shown(path)): added")) }
        changes.sort { $0.path.lexicographicallyPrecedes($1.path) }
        return Verification(name: name, state: changes.isEmpty ? .intact : .damaged, changes: changes.map(\.text))
    }
}
