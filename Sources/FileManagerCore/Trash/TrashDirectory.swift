import Glibc
import SystemPackage

/// One user's `.Trash-UID/` of the volume, opened: `files/`, `info/` and `expunged/` (where
/// an empty moves an item before deleting it, so that it vanishes from `files/` in one step).
///
/// It is reached through a live mount or in the store. `hooks` are set when it is the
/// store's while a mount is live: every name changed here is then the daemon's own change
/// behind the kernel's back, published through them (`StoreChangeHooks`).
final class TrashDirectory {
    let directory: CInt
    let files: CInt
    let info: CInt
    let uid: uid_t
    /// `.Trash-UID` as a user sees it (under the mount, or in the store).
    let display: FilePath
    let hooks: StoreChangeHooks?

    /// Opens (with `creating`, makes first: mode 0700, owned by the caller) `.Trash-UID` in
    /// `parent`. A link or a directory of another user there is refused, as the
    /// specification asks.
    init(parent: CInt, uid: uid_t, creating: Bool, display: FilePath, hooks: StoreChangeHooks?) throws(FileManagerError) {
        self.uid = uid
        self.display = display.appending(".Trash-\(uid)")
        self.hooks = hooks
        (directory, files, info) = try Self.open(parent, uid: uid, creating: creating, display: self.display.string)
    }

    /// Made only where the kernel sees it happen (through a mount, or with none live).
    private static func open(_ parent: CInt, uid: uid_t, creating: Bool, display shown: String) throws(FileManagerError) -> (CInt, CInt, CInt) {
        var opened: [CInt] = []
        do throws(Errno) {
            let name = Array(".Trash-\(uid)".utf8)
            if creating { try makeDirectory(parent, name) }
            let top = try withCName(name) { p throws(Errno) in try Syscall.openat(parent, p, O_PATH | O_DIRECTORY | O_NOFOLLOW) }
            opened.append(top)
            let st = try Syscall.fstat(top)
            guard st.st_uid == uid else { throw Errno.notPermitted }
            for sub in ["files", "info"] {
                if creating { try makeDirectory(top, Array(sub.utf8)) }
                opened.append(try Syscall.openat(top, sub, O_PATH | O_DIRECTORY | O_NOFOLLOW))
            }
            return (opened[0], opened[1], opened[2])
        } catch {
            opened.forEach(Syscall.close)
            if error == .notPermitted {
                throw FileManagerError.permissionDenied("\(shown) (it is not a directory of uid \(uid)'s own)")
            }
            if error == .tooManySymbolicLinkLevels || error == .notDirectory {
                throw FileManagerError.permissionDenied("\(shown) (not a directory of its own: a link or a file)")
            }
            throw FileManagerError(error, path: shown)
        }
    }

    /// mkdir, mode 0700; an existing directory is fine.
    private static func makeDirectory(_ parent: CInt, _ name: [UInt8]) throws(Errno) {
        do throws(Errno) {
            try withCName(name) { p throws(Errno) in try Syscall.mkdirat(parent, p, 0o700) }
        } catch .fileExists {
            return
        }
    }

    convenience init(store: Store, uid: uid_t, creating: Bool, hooks: StoreChangeHooks? = nil) throws(FileManagerError) {
        try self.init(parent: store.trashFD, uid: uid, creating: creating, display: store.path.appending("trash"), hooks: hooks)
    }

    deinit { [directory, files, info].forEach(Syscall.close) }

    /// Runs the change of the entry `name` of `dir`, one of this trash's directories (`in`:
    /// `files`, `info`, or nil for `.Trash-UID` itself) or another directory of the same
    /// place, known to the mount as `at` (see `hooks`).
    func change(_ dir: CInt, _ name: [UInt8], in sub: String?, at path: FilePath? = nil, removing: Bool = false,
                _ body: (UnsafePointer<CChar>) throws(Errno) -> Void) throws(Errno) {
        try withCName(name) { p throws(Errno) in
            guard let hooks, let component = FilePath.Component(platformString: p) else { return try body(p) }
            var mountPath = path ?? FilePath(".Trash-\(uid)")
            if path == nil, let sub { mountPath.append(sub) }
            if path == nil { mountPath.append(component) }
            try hooks.changing(dir, component, at: mountPath, deleting: removing) { () throws(Errno) in try body(p) }
        }
    }

    // MARK: Info files

    /// The parsed info file of the trash name `name`; nil when it is missing or unusable.
    func readInfo(_ name: [UInt8]) -> TrashInfo? {
        guard case .success(let info) = infoFile(name) else { return nil }
        return info
    }

    /// The info file of `name`, or why it cannot be used.
    func infoFile(_ name: [UInt8]) -> Result<TrashInfo, FileManagerError> {
        let shown = "\(display)/info/\(Bytes.display(TrashNaming.infoName(name)))"
        do throws(Errno) {
            guard let data = try Self.readRegularFile(info, TrashNaming.infoName(name), limit: 64 * 1024) else {
                return .failure(.invalidArgument("\(shown): not a trash info file (not a regular file of at most 64 KiB)"))
            }
            do throws(TrashInfo.Problem) {
                return .success(try TrashInfo.parse(data))
            } catch {
                return .failure(.invalidArgument("\(shown): \(error)"))
            }
        } catch {
            if error == .noSuchFileOrDirectory {
                return .failure(FileManagerError.noSuchItem("\(shown) (the trash has no info file for \(Bytes.display(name)))"))
            }
            return .failure(FileManagerError(error, path: shown))
        }
    }

    /// The bytes of the regular file `name` of `dir` (never reached through a link), if it
    /// holds at most `limit` bytes; nil for anything else.
    static func readRegularFile(_ dir: CInt, _ name: [UInt8], limit: Int) throws(Errno) -> [UInt8]? {
        let fd = try withCName(name) { p throws(Errno) in try Syscall.openat(dir, p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK) }
        defer { Syscall.close(fd) }
        let st = try Syscall.fstat(fd)
        guard (st.st_mode & S_IFMT) == S_IFREG, st.st_size <= limit else { return nil }
        var data = [UInt8](repeating: 0, count: Int(st.st_size))
        let n = data.withUnsafeMutableBytes { Glibc.pread(fd, $0.baseAddress, $0.count, 0) }
        guard n >= 0 else { throw Errno(rawValue: Glibc.errno) }
        return Array(data[..<n])
    }

    func removeInfo(_ name: [UInt8]) {
        _ = try? change(info, TrashNaming.infoName(name), in: "info", removing: true) { p throws(Errno) in try Syscall.unlinkat(info, p, 0) }
    }

    /// Whether `name` is taken in `files/` or `info/`.
    func isTaken(_ name: [UInt8]) -> Bool {
        let inFiles = (try? withCName(name) { p throws(Errno) in try Syscall.fstatat(files, p) }) != nil
        let inInfo = (try? withCName(TrashNaming.infoName(name)) { p throws(Errno) in try Syscall.fstatat(info, p) }) != nil
        return inFiles || inInfo
    }

    /// Reserves a free name for an item called `name` by making its info file (O_EXCL, as
    /// the specification asks), and writes `info` into it. `chosen` hears each name tried
    /// before it is made (the journal keeps it).
    func reserve(for name: [UInt8], _ record: TrashInfo, chosen: ([UInt8]) -> Void) throws(FileManagerError) -> [UInt8] {
        let data = record.encoded
        for attempt in 0..<CollisionNames.limit {
            let candidate = TrashNaming.candidate(name, attempt: attempt)
            if isTaken(candidate) { continue }
            chosen(candidate)
            let infoName = TrashNaming.infoName(candidate)
            let fd: CInt
            do throws(Errno) {
                var made: CInt = -1
                try change(info, infoName, in: "info") { p throws(Errno) in
                    made = try Syscall.openat(info, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
                }
                fd = made
            } catch .fileExists {
                continue
            } catch {
                throw FileManagerError(error, path: "\(display)/info/\(Bytes.display(infoName))")
            }
            defer { Syscall.close(fd) }
            do throws(Errno) {
                if geteuid() == 0 { _ = fchown(fd, uid, gid_t.max) }
                try Self.write(fd, data)
                try Syscall.fsync(fd, dataOnly: true)
            } catch {
                removeInfo(candidate)
                throw FileManagerError(error, path: "\(display)/info/\(Bytes.display(infoName))")
            }
            return candidate
        }
        throw .busy("\(display): no free name for \(Bytes.display(name))")
    }

    // MARK: Used through a mount or with none live (never with `hooks`)

    /// `expunged/`, made on first use.
    func expunged() throws(FileManagerError) -> CInt {
        do {
            do { try Syscall.mkdirat(directory, "expunged", 0o700) } catch .fileExists {}
            return try Syscall.openat(directory, "expunged", O_PATH | O_DIRECTORY | O_NOFOLLOW)
        } catch {
            throw FileManagerError(error, path: "\(display)/expunged")
        }
    }

    // MARK: directorysizes

    /// The specification's cache of trashed directories' sizes: `SIZE MTIME NAME` lines,
    /// NAME percent-encoded, MTIME that of the item's info file.
    func directorySizes() -> [[UInt8]: (size: Int64, mtime: Int64)] {
        guard let data = try? Self.readRegularFile(directory, Array("directorysizes".utf8), limit: 64 << 20) else { return [:] }
        var result: [[UInt8]: (Int64, Int64)] = [:]
        for line in data.split(separator: 10) {
            let fields = line.split(separator: 0x20, maxSplits: 2)
            guard fields.count == 3, let size = Int64(String(decoding: fields[0], as: UTF8.self)),
                  let mtime = Int64(String(decoding: fields[1], as: UTF8.self)),
                  let name = TrashInfo.percentDecoded(fields[2]) else { continue }
            result[name] = (size, mtime)
        }
        return result
    }

    /// Writes the cache anew (a new file renamed over the old one).
    func writeDirectorySizes(_ sizes: [[UInt8]: (size: Int64, mtime: Int64)]) {
        var data: [UInt8] = []
        for (name, entry) in sizes.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            let head: [UInt8] = Array("\(entry.size) \(entry.mtime) ".utf8)
            data.append(contentsOf: head)
            data.append(contentsOf: TrashInfo.percentEncoded(name))
            data.append(10)
        }
        let temporary = Array("directorysizes.\(getpid()).tmp".utf8)
        do {
            let fd = try withCName(temporary) { p throws(Errno) in
                try Syscall.openat(directory, p, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0o600)
            }
            defer { Syscall.close(fd) }
            try Self.write(fd, data)
            try withCName(temporary) { t throws(Errno) in try Syscall.renameat2(directory, t, directory, "directorysizes", 0) }
        } catch {
            _ = try? withCName(temporary) { p throws(Errno) in try Syscall.unlinkat(directory, p, 0) }
        }
    }

    static func write(_ fd: CInt, _ data: [UInt8]) throws(Errno) {
        let n = data.withUnsafeBytes { Glibc.pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard n == data.count else { throw n < 0 ? Errno(rawValue: Glibc.errno) : .noSpace }
    }

    /// Drops `names` from the cache, if it has them.
    func forgetDirectorySizes(_ names: [[UInt8]]) {
        var sizes = directorySizes()
        let before = sizes.count
        for name in names { sizes[name] = nil }
        if sizes.count != before { writeDirectorySizes(sizes) }
    }
}

/// Names as bytes, and how messages show them.
public enum Bytes {
    /// `bytes` as text, each byte that is not part of a valid UTF-8 sequence as `\xHH`.
    public static func display(_ bytes: [UInt8]) -> String {
        var text = ""
        var i = 0
        while i < bytes.count {
            let lead = bytes[i]
            let length: Int
            switch lead {
            case 0..<0x80: length = 1
            case 0xC2...0xDF: length = 2
            case 0xE0...0xEF: length = 3
            case 0xF0...0xF4: length = 4
            default: length = 0
            }
            if length > 0, i + length <= bytes.count, let valid = String(validating: bytes[i..<i + length], as: UTF8.self) {
                text += valid
                i += length
            } else {
                text += "\\x" + String(lead, radix: 16, uppercase: true)
                i += 1
            }
        }
        return text
    }

    /// The bytes of a name.
    public static func of(_ component: FilePath.Component) -> [UInt8] {
        component.withPlatformString { p in Array(UnsafeRawBufferPointer(start: p, count: strlen(p))) }
    }
}
