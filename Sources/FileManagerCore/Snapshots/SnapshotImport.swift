import CArchive
import CLinux
import Glibc
import SystemPackage

/// `snapshot import` (docs/DESIGN.md 54): a tar or pax archive read with libarchive and
/// written by us, member by member, into a private directory of `.staging/`, then published
/// as a snapshot with the same journaled rename as `publish`.
///
/// Every member is checked before anything of it is written, and the first one that fails
/// refuses the whole archive (what was written goes): absolute paths, `..`, symbolic links
/// whose target is absolute or climbs above the snapshot's root, paths through a symbolic
/// link, devices, FIFOs and sockets, duplicate members, hard links to anything but an
/// earlier file member, damaged headers (bad checksums), truncated or corrupt archives.
/// These are libarchive's ARCHIVE_EXTRACT_SECURE_* checks and more, done here because
/// `archive_write_disk` cannot write below a directory descriptor, names no reason a tool
/// could test, and lets a symbolic link point anywhere.
extension SnapshotArchive {
    /// What an import read: the counts `snapshot list` shows.
    public struct ImportTotals: Sendable, Equatable {
        public var members = 0
        public var files: Int64 = 0
        public var bytes: Int64 = 0
    }

    /// What was extracted into `staging/<staged>`: the archive's root. When every member is
    /// below one directory (`NAME/…`, as `export` writes), `top` names it: that directory is
    /// the snapshot, else the archive's root is.
    public struct Extracted: Sendable {
        public var top: [UInt8]?
        public var totals: ImportTotals
    }

    /// Owner and mode policy: only a root caller keeps the archive's owners and set-ID bits;
    /// anyone else gets every item as their own, set-ID bits dropped (as `inbox deliver`).
    public struct Ownership: Sendable {
        public var keepOwners: Bool
        public var uid: uid_t
        public var gid: gid_t
        public init(caller: Caller) {
            keepOwners = caller.uid == 0
            uid = caller.uid
            gid = caller.gid
        }
    }

    /// Reads the archive on `input` into the new directory `staged` of `dir` (which must not
    /// exist). On any refusal or failure nothing stays behind. `label` names the archive in
    /// errors; `progress` is called after each member with the archive bytes read so far.
    public static func extract(_ input: CInt, into dir: CInt, _ staged: [UInt8], label: String, ownership: Ownership,
                               now: Double = Double(time(nil)),
                               progress: (_ done: Int64) -> Void = { _ in }) throws(FileManagerError) -> Extracted {
        do {
            try withCName(staged) { p throws(Errno) in try Syscall.mkdirat(dir, p, 0o700) }
        } catch {
            throw FileManagerError(error, path: label)
        }
        let root: CInt
        do { root = try withCName(staged) { p throws(Errno) in try Syscall.openat(dir, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) } } catch {
            FileWrapper.removeItem(dir, staged)
            throw FileManagerError(error, path: label)
        }
        var extractor = Extractor(root: root, label: label, ownership: ownership, now: now)
        defer { extractor.closeAll() }
        do {
            let result = try extractor.run(input, progress: progress)
            return result
        } catch {
            extractor.closeAll()
            FileWrapper.removeItem(dir, staged)
            throw error
        }
    }

    /// What the archive said of one item, applied once it is written (directories last).
    struct Attributes {
        var mode: mode_t
        var uid: uid_t
        var gid: gid_t
        var mtime: timespec
        var xattrs: [([CChar], [UInt8])]
    }

    enum Node {
        case directory(explicit: Bool)
        case file
        case link([UInt8])
    }

    struct Extractor {
        let root: CInt
        let label: String
        let ownership: Ownership
        let now: Double
        var nodes: [[UInt8]: Node] = [:]
        /// Directories, explicit and implied, in the order made: their attributes go last,
        /// deepest first, so that writing their children changes none of them.
        var directories: [([UInt8], Attributes)] = []
        var directoryIndex: [[UInt8]: Int] = [:]
        var links: [([UInt8], [UInt8], String)] = []
        var totals = ImportTotals()
        /// Open parent directories by path, a few at a time.
        var open: [[UInt8]: CInt] = [:]
        var previous: String?
        /// Where the last member's data ended (bytes of the archive consumed).
        var dataEnd: Int64 = 0

        init(root: CInt, label: String, ownership: Ownership, now: Double) {
            self.root = root
            self.label = label
            self.ownership = ownership
            self.now = now
            open[[]] = root
        }

        /// Closes every directory held, the root too; again is harmless.
        mutating func closeAll() {
            for fd in open.values { Syscall.close(fd) }
            open = [:]
        }

        func refuse(_ member: String, _ reason: String) -> FileManagerError {
            .invalidArgument("\(label): \(member): refused, \(reason)")
        }

        mutating func run(_ input: CInt, progress: (Int64) -> Void) throws(FileManagerError) -> Extracted {
            guard let archive = archive_read_new() else { throw .system(.noMemory, label) }
            defer { archive_read_free(archive) }
            archive_read_support_format_tar(archive)
            archive_read_support_filter_all(archive)
            guard archive_read_open_fd(archive, input, 1 << 16) == ARCHIVE_OK else {
                throw refuse("the first member", "not a tar archive, or a damaged header (\(SnapshotArchive.message(archive)))")
            }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 4096)
            defer { buffer.deallocate() }
            while true {
                var entry: OpaquePointer?
                let status = archive_read_next_header(archive, &entry)
                if status == ARCHIVE_EOF { break }
                guard status == ARCHIVE_OK || status == ARCHIVE_WARN, let entry else {
                    let what = previous.map { "the member after \($0)" } ?? "the first member"
                    throw .invalidArgument("\(label): \(what): refused, a damaged or truncated archive (\(SnapshotArchive.message(archive)))")
                }
                try add(entry, archive)
                totals.members += 1
                // libarchive reads its data lazily: what it skips (directories, links) counts.
                archive_read_data_skip(archive)
                dataEnd = archive_filter_bytes(archive, 0)
                progress(archive_filter_bytes(archive, -1))
            }
            // libarchive takes an archive that stops at a header's place for a whole one
            // ("some writers omit the end"): ours and GNU tar's end with zero blocks, which it
            // consumes; without them the archive was cut short.
            if archive_filter_bytes(archive, 0) - dataEnd < 512 {
                throw refuse(previous.map { "the end after \($0)" } ?? "the first member",
                             "a truncated archive (no end-of-archive blocks)")
            }
            // An empty snapshot is more likely a wrong file (/dev/zero, a blank tape) than a wish.
            if totals.members == 0 { throw .invalidArgument("\(label): refused, an archive without members") }
            try checkLinks()
            let top = singleTop()
            if top == nil, nodes[[]] == nil {
                // No `./` member: the snapshot's root gets the caller's defaults.
                setDirectory([], Attributes(mode: 0o755, uid: ownership.uid, gid: ownership.gid,
                                            mtime: timespec(tv_sec: Int(now), tv_nsec: 0), xattrs: []))
            }
            try applyDirectories()
            return Extracted(top: top, totals: totals)
        }

        /// A name as bytes: as the archive holds them (raw, or `hdrcharset=BINARY`), else its
        /// UTF-8 form from a pax header.
        static func bytes(_ c: UnsafePointer<CChar>?) -> [UInt8]? {
            guard let c else { return nil }
            return Array(UnsafeRawBufferPointer(start: c, count: strlen(c)))
        }

        /// `raw` as components below the archive's root: `.` and empty ones dropped;
        /// absolute paths and `..` refused.
        func components(_ raw: [UInt8], member: String, what: String) throws(FileManagerError) -> [[UInt8]] {
            guard !raw.isEmpty else { throw refuse(member, "an empty \(what)") }
            if raw.first == 0x2F { throw refuse(member, "an absolute \(what)") }
            var result: [[UInt8]] = []
            for part in raw.split(separator: 0x2F, omittingEmptySubsequences: true) {
                if part.elementsEqual([0x2E]) { continue }
                if part.elementsEqual([0x2E, 0x2E]) { throw refuse(member, "a '..' component in its \(what)") }
                result.append(Array(part))
            }
            return result
        }

        static func join(_ parts: [[UInt8]]) -> [UInt8] {
            var path: [UInt8] = []
            for part in parts {
                if !path.isEmpty { path.append(0x2F) }
                path.append(contentsOf: part)
            }
            return path
        }

        func attributes(_ entry: OpaquePointer, type: mode_t) -> Attributes {
            var mode = archive_entry_perm(entry) & 0o7777
            var uid = ownership.uid, gid = ownership.gid
            if ownership.keepOwners {
                uid = uid_t(truncatingIfNeeded: archive_entry_uid(entry))
                gid = gid_t(truncatingIfNeeded: archive_entry_gid(entry))
            } else {
                mode &= 0o1777
            }
            let mtime = archive_entry_mtime_is_set(entry) != 0
                ? timespec(tv_sec: archive_entry_mtime(entry), tv_nsec: archive_entry_mtime_nsec(entry))
                : timespec(tv_sec: Int(now), tv_nsec: 0)
            var xattrs: [([CChar], [UInt8])] = []
            if type != S_IFLNK, archive_entry_xattr_reset(entry) > 0 {
                var name: UnsafePointer<CChar>?
                var value: UnsafeRawPointer?
                var size = 0
                // Only `user.*`: other namespaces are the system's, not the archive's to set.
                while archive_entry_xattr_next(entry, &name, &value, &size) == ARCHIVE_OK {
                    guard let name, strncmp(name, "user.", 5) == 0 else { continue }
                    let bytes = value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
                    xattrs.append((Array(UnsafeBufferPointer(start: name, count: strlen(name) + 1)), bytes))
                }
            }
            return Attributes(mode: mode, uid: uid, gid: gid, mtime: mtime, xattrs: xattrs)
        }

        mutating func add(_ entry: OpaquePointer, _ archive: OpaquePointer) throws(FileManagerError) {
            guard let raw = Self.bytes(archive_entry_pathname(entry)) ?? Self.bytes(archive_entry_pathname_utf8(entry)) else {
                throw refuse(previous.map { "the member after \($0)" } ?? "the first member", "a member without a name")
            }
            let member = Bytes.display(raw)
            previous = member
            let parts = try components(raw, member: member, what: "path")
            let path = Self.join(parts)
            let hardlink = Self.bytes(archive_entry_hardlink(entry)) ?? Self.bytes(archive_entry_hardlink_utf8(entry))
            let type = hardlink != nil ? S_IFREG : archive_entry_filetype(entry)
            switch type {
            case S_IFREG, S_IFDIR, S_IFLNK: break
            case S_IFCHR: throw refuse(member, "a character device")
            case S_IFBLK: throw refuse(member, "a block device")
            case S_IFIFO: throw refuse(member, "a FIFO")
            case S_IFSOCK: throw refuse(member, "a socket")
            default: throw refuse(member, "an item of unknown type")
            }
            if parts.isEmpty {
                // `./`: the archive's root itself.
                guard type == S_IFDIR, hardlink == nil else { throw refuse(member, "names the archive's root but is not a directory") }
                if case .directory(explicit: true)? = nodes[[]] { throw refuse(member, "a duplicate member") }
                nodes[[]] = .directory(explicit: true)
                setDirectory([], attributes(entry, type: type))
                return
            }
            if let existing = nodes[path] {
                guard case .directory(explicit: false) = existing, type == S_IFDIR, hardlink == nil else {
                    throw refuse(member, "a duplicate member")
                }
            }
            if open.count > 64 {
                // Few descriptors held: a deep tree must not reach the process's limit.
                for (p, fd) in open where !p.isEmpty { Syscall.close(fd) }
                open = [[]: root]
            }
            let parent = try parentDirectory(parts, member: member)
            let name = parts[parts.count - 1]
            let attrs = attributes(entry, type: type)
            let shown = "\(label): \(member)"
            if let hardlink {
                let target = try components(hardlink, member: member, what: "hard link target")
                guard !target.isEmpty, case .file? = nodes[Self.join(target)] else {
                    throw refuse(member, "a hard link to \(Bytes.display(hardlink)), which is not an earlier file member")
                }
                let from = try parentDirectory(target, member: member)
                try Self.sys(shown) { () throws(Errno) in
                    try withCName(target[target.count - 1]) { o throws(Errno) in
                        try withCName(name) { n throws(Errno) in try Syscall.linkat(from, o, parent, n, 0) }
                    }
                }
                nodes[path] = .file
                totals.files += 1
                return
            }
            switch type {
            case S_IFDIR:
                if nodes[path] == nil {
                    try Self.sys(shown) { () throws(Errno) in try withCName(name) { p throws(Errno) in try Syscall.mkdirat(parent, p, 0o700) } }
                }
                nodes[path] = .directory(explicit: true)
                setDirectory(path, attrs)
            case S_IFLNK:
                guard let target = Self.bytes(archive_entry_symlink(entry)) ?? Self.bytes(archive_entry_symlink_utf8(entry)),
                      !target.isEmpty else {
                    throw refuse(member, "a symbolic link without a target")
                }
                if target.first == 0x2F { throw refuse(member, "a symbolic link to an absolute path (\(Bytes.display(target)))") }
                if Self.climbs(from: Array(parts.dropLast()), target) {
                    throw refuse(member, "a symbolic link leading outside the snapshot (\(Bytes.display(target)))")
                }
                try Self.sys(shown) { () throws(Errno) in
                    try withCName(target) { t throws(Errno) in
                        try withCName(name) { n throws(Errno) in try Syscall.symlinkat(t, parent, n) }
                    }
                }
                nodes[path] = .link(target)
                links.append((path, target, member))
                try Self.sys(shown) { () throws(Errno) in try Self.applyToLink(attrs, parent, name) }
            default:
                let fd = try Self.sys(shown) { () throws(Errno) -> CInt in
                    try withCName(name) { p throws(Errno) in
                        try Syscall.openat(parent, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                    }
                }
                nodes[path] = .file
                defer { Syscall.close(fd) }
                let size: Int64 = archive_entry_size_is_set(entry) != 0 ? Int64(archive_entry_size(entry)) : -1
                try copyData(archive, to: fd, size: size, member: member)
                try Self.sys(shown) { () throws(Errno) in try Self.apply(attrs, to: fd) }
                totals.files += 1
            }
        }

        /// Runs a system call, its failure named by `shown`.
        static func sys<R>(_ shown: String, _ body: () throws(Errno) -> R) throws(FileManagerError) -> R {
            do { return try body() } catch { throw FileManagerError(error, path: shown) }
        }

        /// A link's owner and time (its mode is always 0777; `user.*` attributes cannot be set
        /// on links).
        static func applyToLink(_ a: Attributes, _ parent: CInt, _ name: [UInt8]) throws(Errno) {
            try withCName(name) { n throws(Errno) in
                if geteuid() == 0 { try Syscall.fchownat(parent, n, a.uid, a.gid) }
                var times = (timespec(tv_sec: 0, tv_nsec: Int(UTIME_OMIT)), a.mtime)
                _ = try withUnsafePointer(to: &times) { p throws(Errno) in
                    try Syscall.check { utimensat(parent, n, UnsafeRawPointer(p).assumingMemoryBound(to: timespec.self), AT_SYMLINK_NOFOLLOW) }
                }
            }
        }

        /// Whether `target`, read in the directory `parent`, names something above the root
        /// by its words alone (what a chain of links makes of it is `checkLinks`'s).
        static func climbs(from parent: [[UInt8]], _ target: [UInt8]) -> Bool {
            var depth = parent.count
            for part in target.split(separator: 0x2F, omittingEmptySubsequences: true) {
                if part.elementsEqual([0x2E]) { continue }
                if part.elementsEqual([0x2E, 0x2E]) {
                    depth -= 1
                    if depth < 0 { return true }
                } else {
                    depth += 1
                }
            }
            return false
        }

        /// The directory holding `parts`, made (as an implied directory) where the archive
        /// names none; a path through a link or a file is refused.
        mutating func parentDirectory(_ parts: [[UInt8]], member: String) throws(FileManagerError) -> CInt {
            let parentParts = Array(parts.dropLast())
            let parentPath = Self.join(parentParts)
            if let fd = open[parentPath] { return fd }
            var prefix: [[UInt8]] = []
            for part in parentParts {
                prefix.append(part)
                let p = Self.join(prefix)
                switch nodes[p] {
                case .link?: throw refuse(member, "its path goes through the symbolic link \(Bytes.display(p))")
                case .file?: throw refuse(member, "its path goes through the file \(Bytes.display(p))")
                case .directory?: continue
                case nil:
                    do {
                        try withCName(p) { c throws(Errno) in try Syscall.mkdirat(root, c, 0o700) }
                    } catch {
                        throw FileManagerError(error, path: "\(label): \(Bytes.display(p))")
                    }
                    nodes[p] = .directory(explicit: false)
                    let mode: mode_t = 0o755
                    setDirectory(p, Attributes(mode: mode, uid: ownership.uid, gid: ownership.gid,
                                               mtime: timespec(tv_sec: Int(now), tv_nsec: 0), xattrs: []))
                }
            }
            // The path is all directories we made: no link can be met on the way.
            let fd: CInt
            do {
                fd = try withCName(parentPath) { c throws(Errno) in try Syscall.openat(root, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            } catch {
                throw FileManagerError(error, path: "\(label): \(member)")
            }
            open[parentPath] = fd
            return fd
        }

        mutating func setDirectory(_ path: [UInt8], _ attrs: Attributes) {
            if let i = directoryIndex[path] {
                directories[i].1 = attrs
            } else {
                directoryIndex[path] = directories.count
                directories.append((path, attrs))
            }
        }

        /// Exactly the member's data, holes kept; a member that ends early is a truncated
        /// archive.
        mutating func copyData(_ archive: OpaquePointer, to fd: CInt, size: Int64, member: String) throws(FileManagerError) {
            var end: Int64 = 0
            while true {
                var block: UnsafeRawPointer?
                var count = 0
                var offset: la_int64_t = 0
                let status = archive_read_data_block(archive, &block, &count, &offset)
                if status == ARCHIVE_EOF { break }
                guard status == ARCHIVE_OK || status == ARCHIVE_WARN else {
                    throw refuse(member, "a damaged or truncated archive (\(SnapshotArchive.message(archive)))")
                }
                guard count > 0, let block else { continue }
                var done = 0
                while done < count {
                    let n = pwrite(fd, block + done, count - done, off_t(offset) + off_t(done))
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw .system(Errno(rawValue: errno), "\(label): \(member)")
                    }
                    done += n
                }
                end = max(end, Int64(offset) + Int64(count))
                totals.bytes += Int64(count)
            }
            if size > end, ftruncate(fd, off_t(size)) != 0 {
                throw .system(Errno(rawValue: errno), "\(label): \(member)")
            }
        }

        /// Owner before mode (chown clears set-ID bits), attributes, times last.
        static func apply(_ a: Attributes, to fd: CInt) throws(Errno) {
            if geteuid() == 0 { _ = try Syscall.check { fchown(fd, a.uid, a.gid) } }
            _ = try Syscall.check { fchmod(fd, a.mode) }
            for (name, value) in a.xattrs {
                _ = try Syscall.check { value.withUnsafeBytes { v in clinux_fsetxattr(fd, name, v.baseAddress, v.count, 0) } }
            }
            var times = (timespec(tv_sec: 0, tv_nsec: Int(UTIME_OMIT)), a.mtime)
            _ = try withUnsafePointer(to: &times) { p throws(Errno) in
                try Syscall.check { futimens(fd, UnsafeRawPointer(p).assumingMemoryBound(to: timespec.self)) }
            }
        }

        /// The snapshot's root: the one top directory every member is below, if there is
        /// one and the archive has no `./` member of its own.
        func singleTop() -> [UInt8]? {
            if nodes[[]] != nil { return nil }
            var top: [UInt8]?
            for path in nodes.keys {
                let first = Array(path.split(separator: 0x2F, maxSplits: 1).first ?? [])
                if top == nil { top = first } else if top! != first { return nil }
            }
            guard let top, case .directory? = nodes[top] else { return nil }
            return top
        }

        /// Every link resolved as the kernel would in the finished tree (links through
        /// links): none may leave the snapshot's root (the single top directory when there
        /// is one).
        func checkLinks() throws(FileManagerError) {
            let top = singleTop()
            for (path, target, member) in links {
                var parts = path.split(separator: 0x2F).map { Array($0) }
                parts.removeLast()
                var base: [[UInt8]] = []
                if let top {
                    base = [top]
                    parts.removeFirst()
                }
                if !resolves(base: base, from: parts, target) {
                    throw refuse(member, "a symbolic link leading outside the snapshot (\(Bytes.display(target)))")
                }
            }
        }

        /// Resolves `target` from the directory `base + start`, following the links the
        /// archive made; false when it climbs above `base` or never ends.
        func resolves(base: [[UInt8]], from start: [[UInt8]], _ target: [UInt8]) -> Bool {
            var current = start
            var pending = target.split(separator: 0x2F, omittingEmptySubsequences: true).map { Array($0) }
            pending.reverse()
            var hops = 0
            while let part = pending.popLast() {
                if part == [0x2E] { continue }
                if part == [0x2E, 0x2E] {
                    if current.isEmpty { return false }
                    current.removeLast()
                    continue
                }
                let candidate = current + [part]
                if case .link(let next)? = nodes[Self.join(base + candidate)] {
                    hops += 1
                    if hops > 40 || next.first == 0x2F { return false }
                    pending.append(contentsOf: next.split(separator: 0x2F, omittingEmptySubsequences: true).map { Array($0) }.reversed())
                } else {
                    current = candidate
                }
            }
            return true
        }

        /// Directory attributes, deepest first, now that nothing more is written in them.
        func applyDirectories() throws(FileManagerError) {
            // Deepest first: a directory's own mode may forbid reaching its children.
            let ordered = directories.enumerated().sorted { a, b in
                let (da, db) = (a.element.0.count(where: { $0 == 0x2F }) + (a.element.0.isEmpty ? 0 : 1),
                                b.element.0.count(where: { $0 == 0x2F }) + (b.element.0.isEmpty ? 0 : 1))
                return da != db ? da > db : a.offset < b.offset
            }
            for (_, (path, attrs)) in ordered {
                do {
                    let fd = path.isEmpty ? try Syscall.openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                        : try withCName(path) { c throws(Errno) in try Syscall.openat(root, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
                    defer { Syscall.close(fd) }
                    try Self.apply(attrs, to: fd)
                } catch {
                    throw FileManagerError(error, path: "\(label): \(Bytes.display(path))")
                }
            }
        }
    }
}

extension Snapshots {
    /// Publishes the archive on `input` as a snapshot (`snapshot import`, DESIGN.md 54): read
    /// into `.staging/` (every member checked, the whole archive refused at the first bad
    /// one), then the same journal row and one RENAME_NOREPLACE into `snapshots/` as
    /// `publish`. The name is `wanted`, else the archive's one top directory (as `export`
    /// writes it), else `import-YYYY-MM-DDTHH-MM-SS`; it must be free. `label` names the
    /// archive in errors and in the snapshot's source (`import:LABEL`).
    public func importArchive(_ input: CInt, label: String, name wanted: String? = nil, caller: Caller,
                              top: FilePath? = nil, now: Double = Double(time(nil)),
                              progress: (_ done: Int64) -> Void = { _ in }) throws(FileManagerError) -> SnapshotRecord {
        if let wanted { try Self.validate(name: wanted) }
        let staged = Array("import.\(getpid()).\(UInt32.random(in: 0...UInt32.max))".utf8)
        let extracted = try SnapshotArchive.extract(input, into: store.stagingFD, staged, label: label,
                                                    ownership: .init(caller: caller), now: now, progress: progress)
        // Whatever is left in `.staging/` goes, also after success (the archive's root that
        // held its one top directory): renamed names are simply not there any more.
        defer { FileWrapper.removeItem(store.stagingFD, staged) }
        var name = wanted ?? Self.defaultName("import", now)
        if wanted == nil, let archived = extracted.top {
            name = String(decoding: archived, as: UTF8.self)
            guard (try? Self.validate(name: name)) != nil, Array(name.utf8) == archived else {
                throw .invalidArgument("\(label): its top directory \(Bytes.display(archived)) is not a snapshot name (give one with --name)")
            }
        }
        if (try? Syscall.fstatat(store.snapshotsFD, name)) != nil || exists(name) {
            throw .itemExists(Self.shown("snapshots/\(name)", top))
        }
        // The directory that becomes the snapshot, moved to the top of `.staging/` first so
        // that the rename into `snapshots/` is the one step `recover` knows.
        var placed = staged
        if let archived = extracted.top {
            placed = Array("import.\(getpid()).\(UInt32.random(in: 0...UInt32.max))".utf8)
            do {
                let inner = try withCName(staged) { p throws(Errno) in
                    try Syscall.openat(store.stagingFD, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                }
                defer { Syscall.close(inner) }
                try withCName(archived) { a throws(Errno) in
                    try withCName(placed) { p throws(Errno) in try Syscall.renameat2(inner, a, store.stagingFD, p, RENAME_NOREPLACE) }
                }
            } catch {
                throw FileManagerError(error, path: label)
            }
        }
        defer { if placed != staged { FileWrapper.removeItem(store.stagingFD, placed) } }
        let record = SnapshotRecord(name: name, source: "import:\(label)", created: now, expires: nil,
                                    files: extracted.totals.files, bytes: extracted.totals.bytes, ownerUID: caller.uid)
        try? Syscall.fsync(store.stagingFD, dataOnly: false)
        try insert(record, state: "publishing")
        do throws(FileManagerError) {
            try place(placed, as: name)
        } catch {
            deleteRow(name)
            throw error
        }
        recordManifest(name: name)
        setState(name, "published")
        store.syncDirectory(store.snapshotsFD)
        return record
    }
}
