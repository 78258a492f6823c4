import CLinux
import Glibc
import SystemPackage

/// The attributes a wrapper keeps of its item (NSFileWrapper's `fileAttributes`): permission
/// bits, owner, group, modification time and the `user.*` extended attributes.
public struct FileWrapperAttributes: Equatable, Sendable {
    public var mode: mode_t
    public var uid: uid_t
    public var gid: gid_t
    public var modificationSeconds: Int64
    public var modificationNanoseconds: Int64
    /// `user.*` attributes by name (without the trailing NUL).
    public var extendedAttributes: [[UInt8]: [UInt8]]

    public init(mode: mode_t = 0o644, uid: uid_t = getuid(), gid: gid_t = getgid(),
                modificationSeconds: Int64 = Int64(time(nil)), modificationNanoseconds: Int64 = 0,
                extendedAttributes: [[UInt8]: [UInt8]] = [:]) {
        self.mode = mode
        self.uid = uid
        self.gid = gid
        self.modificationSeconds = modificationSeconds
        self.modificationNanoseconds = modificationNanoseconds
        self.extendedAttributes = extendedAttributes
    }

    init(_ st: stat, xattrsOf fd: CInt?) {
        mode = st.st_mode & 0o7777
        uid = st.st_uid
        gid = st.st_gid
        modificationSeconds = Int64(st.st_mtim.tv_sec)
        modificationNanoseconds = Int64(st.st_mtim.tv_nsec)
        var xattrs: [[UInt8]: [UInt8]] = [:]
        if let fd {
            let prefix = Array("user.".utf8)
            for name in ExtendedAttributes.names(fd) {
                let bytes = name.dropLast().map { UInt8(bitPattern: $0) }
                guard bytes.starts(with: prefix), let value = ExtendedAttributes.value(fd, name) else { continue }
                xattrs[bytes] = value
            }
        }
        extendedAttributes = xattrs
    }
}

/// Where a regular-file wrapper read from the disk finds its data: read lazily, so that a
/// tree of large files costs no memory, and shared (FICLONE) or copied when written.
final class FileWrapperSource: @unchecked Sendable {
    /// An `O_PATH` descriptor of the directory that held the file, shared by its siblings.
    let parent: WrapperDirectory
    let name: [UInt8]
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let linkCount: Int
    let identity: FileIdentity
    let linkedData: (@Sendable (UInt64) -> CInt?)?

    init(parent: WrapperDirectory, name: [UInt8], _ st: stat, linkedData: (@Sendable (UInt64) -> CInt?)? = nil) {
        self.linkedData = linkedData
        self.parent = parent
        self.name = name
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        linkCount = Int(st.st_nlink)
        identity = FileIdentity(st)
    }

    /// The file's data opened for reading, if it is still the file that was read.
    func open() throws(Errno) -> CInt {
        if let linkedData, let fd = linkedData(inode) { return fd }
        let fd = try withCName(name) { p throws(Errno) in try Syscall.openat(parent.fd, p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard let st = try? Syscall.fstat(fd), UInt64(st.st_ino) == inode, UInt64(st.st_dev) == device else {
            Syscall.close(fd)
            throw .noSuchFileOrDirectory
        }
        return fd
    }
}

/// An open directory descriptor that closes when its last user goes.
final class WrapperDirectory: @unchecked Sendable {
    let fd: CInt
    init(_ fd: CInt) { self.fd = fd }
    deinit { Syscall.close(fd) }
}

/// NSFileWrapper's model of a file-system item in memory (docs/SEMANTICS.md §4): a regular
/// file, a directory of named wrappers, or a symbolic link, with its attributes. Read from
/// the disk without following links; FIFOs, sockets and devices are skipped with a warning.
/// Regular files read from the disk keep a reference to their data rather than the bytes.
public final class FileWrapper: @unchecked Sendable {
    public enum Kind: Equatable, Sendable { case regularFile, directory, symbolicLink }

    enum Contents {
        case bytes([UInt8])
        case file(FileWrapperSource)
        case directory([[UInt8]: FileWrapper])
        case link([UInt8])
    }

    var contents: Contents
    public var fileAttributes: FileWrapperAttributes
    /// The name the wrapper would like (NSFileWrapper's `preferredFilename`).
    public var preferredFilename: String?
    /// The name it was read under or last written as.
    public var filename: String?

    /// What a reading leaves out, and where its warnings go.
    public struct ReadingOptions {
        /// Called with the path relative to the top (empty for the top itself), the item's
        /// `stat` and an `O_PATH` descriptor of it; false leaves the item out.
        public var include: (_ relative: [UInt8], _ st: stat, _ fd: CInt) -> Bool
        public var warning: (String) -> Void
        /// Where a regular file's data is when it is not the file's own: a snapshot read in
        /// the store (`SnapshotData.openLinked`), by the file's inode number; nil: its own.
        public var linkedData: (@Sendable (_ inode: UInt64) -> CInt?)?
        /// Regular files' data read now, into memory (NSFileWrapper's `.immediate`), rather
        /// than when it is first needed.
        public var immediate: Bool

        public init(include: @escaping ([UInt8], stat, CInt) -> Bool = { _, _, _ in true },
                    warning: @escaping (String) -> Void = { _ in },
                    linkedData: (@Sendable (_ inode: UInt64) -> CInt?)? = nil, immediate: Bool = false) {
            self.include = include
            self.warning = warning
            self.linkedData = linkedData
            self.immediate = immediate
        }
    }

    // MARK: - Making wrappers

    public init(regularFileWithContents bytes: [UInt8], attributes: FileWrapperAttributes = FileWrapperAttributes()) {
        contents = .bytes(bytes)
        fileAttributes = attributes
    }

    public init(directoryWithFileWrappers children: [String: FileWrapper],
                attributes: FileWrapperAttributes = FileWrapperAttributes(mode: 0o755)) {
        var named: [[UInt8]: FileWrapper] = [:]
        for (name, child) in children {
            child.preferredFilename = name
            child.filename = name
            named[Array(name.utf8)] = child
        }
        contents = .directory(named)
        fileAttributes = attributes
    }

    public init(symbolicLinkWithDestination destination: [UInt8], attributes: FileWrapperAttributes = FileWrapperAttributes(mode: 0o777)) {
        contents = .link(destination)
        fileAttributes = attributes
    }

    init(contents: Contents, attributes: FileWrapperAttributes, name: [UInt8]) {
        self.contents = contents
        fileAttributes = attributes
        let text = String(decoding: name, as: UTF8.self)
        preferredFilename = text
        filename = text
    }

    /// Reads the item `name` of the directory `dir` (any descriptor of it, `O_PATH` too),
    /// never following a link. Throws when the item itself is missing, unreadable or of a
    /// kind a wrapper cannot hold; inside a directory such items are skipped with a warning.
    /// `display` names the item in errors and warnings (default: its name).
    public convenience init(directory dir: CInt, name: [UInt8], options: ReadingOptions = ReadingOptions(),
                            display shown: String? = nil) throws(FileManagerError) {
        let display = shown ?? Bytes.display(name)
        let parent: CInt
        do { parent = try Syscall.openat(dir, ".", O_PATH | O_DIRECTORY | O_CLOEXEC) } catch {
            throw FileManagerError(error, path: display)
        }
        let handle = WrapperDirectory(parent)
        guard let wrapper = try FileWrapper.read(handle, name, relative: [], display: display, options: options, top: true) else {
            throw .invalidArgument("\(display): left out of the reading")
        }
        self.init(contents: wrapper.contents, attributes: wrapper.fileAttributes, name: name)
    }

    private static func read(_ parent: WrapperDirectory, _ name: [UInt8], relative: [UInt8], display: String,
                             options: ReadingOptions, top: Bool) throws(FileManagerError) -> FileWrapper? {
        let fd: CInt
        do {
            fd = try withCName(name) { p throws(Errno) in try Syscall.openat(parent.fd, p, O_PATH | O_NOFOLLOW | O_CLOEXEC) }
        } catch {
            throw FileManagerError(error, path: display)
        }
        defer { Syscall.close(fd) }
        let st: stat
        do { st = try Syscall.fstat(fd) } catch { throw FileManagerError(error, path: display) }
        guard options.include(relative, st, fd) else { return nil }
        let type = st.st_mode & S_IFMT
        switch type {
        case S_IFREG:
            let attributes = FileWrapperAttributes(st, xattrsOf: fd)
            let source = FileWrapperSource(parent: parent, name: name, st, linkedData: options.linkedData)
            let wrapper = FileWrapper(contents: .file(source), attributes: attributes, name: name)
            if options.immediate, let bytes = try wrapper.regularFileContents() { wrapper.contents = .bytes(bytes) }
            return wrapper
        case S_IFLNK:
            let destination: [UInt8]
            do { destination = try Syscall.readlink(pathDescriptor: fd) } catch { throw FileManagerError(error, path: display) }
            return FileWrapper(contents: .link(destination), attributes: FileWrapperAttributes(st, xattrsOf: nil), name: name)
        case S_IFDIR:
            let attributes = FileWrapperAttributes(st, xattrsOf: fd)
            let names: [FilePath.Component]
            let handle: WrapperDirectory
            do {
                handle = WrapperDirectory(try Syscall.openat(fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC))
                names = try DirectoryStream.open(handle.fd).allNames()
            } catch {
                throw FileManagerError(error, path: display)
            }
            var children: [[UInt8]: FileWrapper] = [:]
            for component in names {
                let child = component.withPlatformString { p in Array(UnsafeRawBufferPointer(start: p, count: strlen(p))) }
                var childRelative = relative
                if !childRelative.isEmpty { childRelative.append(0x2F) }
                childRelative.append(contentsOf: child)
                let childDisplay = display + "/" + Bytes.display(child)
                if let wrapper = try read(handle, child, relative: childRelative, display: childDisplay, options: options, top: false) {
                    children[child] = wrapper
                }
            }
            return FileWrapper(contents: .directory(children), attributes: attributes, name: name)
        default:
            let what = type == S_IFIFO ? "a FIFO" : (type == S_IFSOCK ? "a socket" : "a device file")
            if top { throw .invalidArgument("\(display): \(what) cannot be wrapped") }
            options.warning("\(display): skipped (\(what))")
            return nil
        }
    }

    // MARK: - What it holds

    public var kind: Kind {
        switch contents {
        case .bytes, .file: return .regularFile
        case .directory: return .directory
        case .link: return .symbolicLink
        }
    }

    public var isRegularFile: Bool { kind == .regularFile }
    public var isDirectory: Bool { kind == .directory }
    public var isSymbolicLink: Bool { kind == .symbolicLink }

    /// A directory's children by name; nil for other kinds.
    public var fileWrappers: [String: FileWrapper]? {
        guard case .directory(let children) = contents else { return nil }
        var result: [String: FileWrapper] = [:]
        for (name, child) in children { result[String(decoding: name, as: UTF8.self)] = child }
        return result
    }

    /// A directory's children by their names' bytes.
    public var childrenByName: [[UInt8]: FileWrapper]? {
        guard case .directory(let children) = contents else { return nil }
        return children
    }

    /// A link's destination.
    public var symbolicLinkDestination: [UInt8]? {
        guard case .link(let destination) = contents else { return nil }
        return destination
    }

    /// A regular file's data, read now for a file read from the disk.
    public func regularFileContents() throws(FileManagerError) -> [UInt8]? {
        switch contents {
        case .bytes(let bytes): return bytes
        case .file(let source):
            let fd: CInt
            do { fd = try source.open() } catch { throw FileManagerError(error, path: Bytes.display(source.name)) }
            defer { Syscall.close(fd) }
            var result: [UInt8] = []
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8)
            defer { buffer.deallocate() }
            while true {
                let n: Int
                do { n = try Syscall.pread(fd, buffer, off_t(result.count)) } catch {
                    throw FileManagerError(error, path: Bytes.display(source.name))
                }
                if n == 0 { return result }
                result.append(contentsOf: buffer[0..<n])
            }
        default: return nil
        }
    }

    /// Adds `child` under its preferred name, made unique with `.N` (NSFileWrapper's
    /// `addFileWrapper`); returns the name it got.
    @discardableResult
    public func addFileWrapper(_ child: FileWrapper) -> String? {
        guard case .directory(var children) = contents, let preferred = child.preferredFilename, !preferred.isEmpty else { return nil }
        var name = preferred
        var n = 2
        while children[Array(name.utf8)] != nil {
            name = String(decoding: CollisionNames.candidate(Array(preferred.utf8), n), as: UTF8.self)
            n += 1
        }
        child.filename = name
        children[Array(name.utf8)] = child
        contents = .directory(children)
        return name
    }

    public func removeFileWrapper(named name: String) {
        guard case .directory(var children) = contents else { return }
        children[Array(name.utf8)] = nil
        contents = .directory(children)
    }

    /// Counts of what a write makes: files, directories, links, and data bytes (a hard
    /// link's bytes once).
    public struct Totals: Equatable, Sendable {
        public var files = 0
        public var directories = 0
        public var links = 0
        public var bytes: Int64 = 0
    }

    // MARK: - Writing

    /// How data reached the copy: extents shared (FICLONE), the file linked as the data of
    /// a sparse placeholder (`Linker`), or bytes copied. The most sharing way used wins.
    public enum DataSharing: Int, Sendable, Comparable {
        case copied, linked, cloned
        public static func < (a: DataSharing, b: DataSharing) -> Bool { a.rawValue < b.rawValue }
    }

    /// Where extents cannot be shared, gives a copied file's data by a link instead: called
    /// with the source opened for reading and the placeholder's inode number (the
    /// placeholder, already the source's size, holds no data); false copies the data.
    typealias Linker = (_ source: CInt, _ placeholder: UInt64) throws(Errno) -> Bool

    final class WriteContext {
        /// The first copy of each file read with several links, for the others.
        var linked: [FileIdentity: CInt] = [:]
        var totals = Totals()
        var sharing: DataSharing?
        /// FICLONE failed as unsupported once: not tried again.
        var cannotClone = false
        var linker: Linker?
        /// Told the files written so far, after each.
        var progress: ((Int) -> Void)?
        let keepOwner = geteuid() == 0
        deinit { for fd in linked.values { Syscall.close(fd) } }

        func used(_ way: DataSharing) { sharing = max(sharing ?? way, way) }
    }

    /// Writes the wrapper as `name` in `dir`, atomically: built under a staging name beside
    /// it, then renamed into place (replacing what was there, as NSFileWrapper's atomic
    /// write does, unless `replacing` is false). Hard links read inside the tree stay hard
    /// links; data is shared with the source where the file system can (FICLONE), else
    /// copied (copy_file_range).
    ///
    /// `originalContents` (NSFileWrapper's `originalContentsURL`: the item `name` of the
    /// directory descriptor given, typically what is being replaced): a file read from the
    /// disk that is still, unchanged, at the same path there is hard-linked from there
    /// rather than copied.
    @discardableResult
    public func write(to dir: CInt, name: [UInt8], replacing: Bool = true,
                      originalContents: (dir: CInt, name: [UInt8])? = nil) throws(FileManagerError) -> Totals {
        let staging = Array(".\(Bytes.display(name)).cfs-staging-\(getpid())-\(UInt32.random(in: 0...UInt32.max))".utf8)
        let totals = try writeInPlace(to: dir, name: staging, original: originalContents, sharing: nil)
        do {
            try withCName(staging) { s throws(Errno) in
                try withCName(name) { n throws(Errno) in
                    try Syscall.renameat2(dir, s, dir, n, replacing ? 0 : RENAME_NOREPLACE)
                }
            }
        } catch {
            if replacing, error == .isDirectory || error == .directoryNotEmpty || error == .notDirectory {
                // A directory in place: exchange, then remove what was there.
                do {
                    try withCName(staging) { s throws(Errno) in
                        try withCName(name) { n throws(Errno) in try Syscall.renameat2(dir, s, dir, n, RENAME_EXCHANGE) }
                    }
                } catch {
                    Self.removeItem(dir, staging)
                    throw FileManagerError(error, path: Bytes.display(name))
                }
            } else {
                Self.removeItem(dir, staging)
                throw FileManagerError(error, path: Bytes.display(name))
            }
        }
        Self.removeItem(dir, staging)
        filename = String(decoding: name, as: UTF8.self)
        return totals
    }

    /// Writes the tree as `name` in `dir`, which must not exist; what was made is removed
    /// again when it fails. No atomicity: the caller's staging gives it.
    public func writeInPlace(to dir: CInt, name: [UInt8]) throws(FileManagerError) -> Totals {
        try writeInPlace(to: dir, name: name, sharing: nil)
    }

    func writeInPlace(to dir: CInt, name: [UInt8], linker: Linker? = nil, progress: ((Int) -> Void)? = nil,
                      original: (dir: CInt, name: [UInt8])? = nil, sharing: ((DataSharing) -> Void)?) throws(FileManagerError) -> Totals {
        let context = WriteContext()
        context.linker = linker
        context.progress = progress
        do {
            try build(in: dir, name, display: Bytes.display(name), context, original: original)
        } catch {
            Self.removeItem(dir, name)
            throw error
        }
        if let used = context.sharing { sharing?(used) }
        return context.totals
    }

    static func removeItem(_ dir: CInt, _ name: [UInt8]) {
        withCName(name) { removeItem(dir, $0) }
    }

    static func removeItem(_ dir: CInt, _ p: UnsafePointer<CChar>) {
        if unlinkat(dir, p, 0) == 0 { return }
        if let fd = try? Syscall.openat(dir, p, O_PATH | O_DIRECTORY | O_NOFOLLOW) {
            try? TreeRemoval.removeContents(of: fd)
            Syscall.close(fd)
            _ = unlinkat(dir, p, AT_REMOVEDIR)
        }
    }

    /// `original`: where this item was in the original contents, if anywhere.
    private func build(in dir: CInt, _ name: [UInt8], display: String, _ context: WriteContext,
                       original: (dir: CInt, name: [UInt8])? = nil) throws(FileManagerError) {
        do throws(Errno) {
            switch contents {
            case .bytes(let bytes):
                let fd = try withCName(name) { p throws(Errno) in
                    try Syscall.openat(dir, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                }
                defer { Syscall.close(fd) }
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 8)
                defer { buffer.deallocate() }
                buffer.copyBytes(from: bytes)
                var done = 0
                while done < bytes.count {
                    done += try Syscall.pwrite(fd, UnsafeRawBufferPointer(rebasing: buffer[done..<bytes.count]), off_t(done))
                }
                try apply(to: fd, isSymlink: false, context)
                context.totals.files += 1
                context.totals.bytes += Int64(bytes.count)
                context.progress?(context.totals.files)
            case .file(let source):
                let identity = source.identity
                if source.linkCount > 1, let first = context.linked[identity] {
                    try withCName(name) { p throws(Errno) in try Syscall.link(pathDescriptor: first, dir, p) }
                    context.totals.files += 1
                    context.progress?(context.totals.files)
                    return
                }
                if let original, unchanged(source, at: original) {
                    // Unchanged in the original contents: the same file, one more name.
                    try withCName(original.name) { o throws(Errno) in
                        try withCName(name) { p throws(Errno) in try Syscall.linkat(original.dir, o, dir, p, 0) }
                    }
                    context.totals.files += 1
                    context.totals.bytes += source.size
                    context.progress?(context.totals.files)
                    return
                }
                let src = try source.open()
                defer { Syscall.close(src) }
                let fd = try withCName(name) { p throws(Errno) in
                    try Syscall.openat(dir, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                }
                defer { Syscall.close(fd) }
                try Self.fill(fd, from: src, size: source.size, context)
                try apply(to: fd, isSymlink: false, context)
                context.totals.files += 1
                context.totals.bytes += (try? Syscall.fstat(fd)).map { Int64($0.st_size) } ?? source.size
                context.progress?(context.totals.files)
                if source.linkCount > 1, let keep = try? withCName(name, { p throws(Errno) in
                    try Syscall.openat(dir, p, O_PATH | O_NOFOLLOW | O_CLOEXEC)
                }) {
                    context.linked[identity] = keep
                }
            case .link(let destination):
                try withCName(destination) { d throws(Errno) in
                    try withCName(name) { p throws(Errno) in try Syscall.symlinkat(d, dir, p) }
                }
                let fd = try withCName(name) { p throws(Errno) in try Syscall.openat(dir, p, O_PATH | O_NOFOLLOW | O_CLOEXEC) }
                defer { Syscall.close(fd) }
                try apply(to: fd, isSymlink: true, context)
                context.totals.links += 1
            case .directory:
                try withCName(name) { p throws(Errno) in try Syscall.mkdirat(dir, p, 0o700) }
            }
        } catch {
            throw FileManagerError(error, path: display)
        }
        guard case .directory(let children) = contents else { return }
        let fd: CInt
        do {
            fd = try withCName(name) { p throws(Errno) in
                try Syscall.openat(dir, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
        } catch {
            throw FileManagerError(error, path: display)
        }
        defer { Syscall.close(fd) }
        let originalFD = original.flatMap { o in
            try? withCName(o.name) { p throws(Errno) in try Syscall.openat(o.dir, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        }
        defer { if let originalFD { Syscall.close(originalFD) } }
        for childName in children.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            try children[childName]!.build(in: fd, childName, display: display + "/" + Bytes.display(childName), context,
                                           original: originalFD.map { ($0, childName) })
        }
        do { try apply(to: fd, isSymlink: false, context) } catch { throw FileManagerError(error, path: display) }
        context.totals.directories += 1
    }

    /// Whether the file `source` was read from is the item at `original`, with the size it
    /// was read with and the attributes this wrapper has now.
    private func unchanged(_ source: FileWrapperSource, at original: (dir: CInt, name: [UInt8])) -> Bool {
        guard let fd = try? withCName(original.name, { p throws(Errno) in
            try Syscall.openat(original.dir, p, O_PATH | O_NOFOLLOW | O_CLOEXEC)
        }) else { return false }
        defer { Syscall.close(fd) }
        guard let st = try? Syscall.fstat(fd), FileIdentity(st) == source.identity, Int64(st.st_size) == source.size else { return false }
        return FileWrapperAttributes(st, xattrsOf: fd) == fileAttributes
    }

    /// Gives the new file `fd` the data of `src`: shared extents, else a link (a sparse
    /// file of the right size), else a copy.
    private static func fill(_ fd: CInt, from src: CInt, size: Int64, _ context: WriteContext) throws(Errno) {
        if !context.cannotClone {
            if clinux_ficlone(fd, src) == 0 { return context.used(.cloned) }
            let error = errno
            if error == EOPNOTSUPP || error == EXDEV || error == EINVAL || error == ENOTTY { context.cannotClone = true }
        }
        let size = (try? Syscall.fstat(src)).map { Int64($0.st_size) } ?? size
        if size > 0, let linker = context.linker {
            try Syscall.ftruncate(fd, off_t(size))
            if try linker(src, UInt64(try Syscall.fstat(fd).st_ino)) { return context.used(.linked) }
            try Syscall.ftruncate(fd, 0)
        }
        try TreeCopy.copyData(from: src, to: fd, size: Int(size))
        context.used(.copied)
    }

    /// Owner before mode (chown clears set-ID bits), attributes, times last.
    private func apply(to fd: CInt, isSymlink: Bool, _ context: WriteContext) throws(Errno) {
        let a = fileAttributes
        if context.keepOwner { try? Syscall.fchown(pathDescriptor: fd, a.uid, a.gid) }
        if !isSymlink {
            try Syscall.fchmod(pathDescriptor: fd, a.mode & 0o7777)
            for (name, value) in a.extendedAttributes {
                var cName = name.map { CChar(bitPattern: $0) }
                cName.append(0)
                value.withUnsafeBytes { b in _ = try? Syscall.setxattr(pathDescriptor: fd, cName, b, 0) }
            }
        }
        var times = (timespec(tv_sec: 0, tv_nsec: UTIME_OMIT),
                     timespec(tv_sec: Int(a.modificationSeconds), tv_nsec: Int(a.modificationNanoseconds)))
        try withUnsafePointer(to: &times) { p throws(Errno) in
            try Syscall.utimens(pathDescriptor: fd, isSymlink: isSymlink, UnsafeRawPointer(p).assumingMemoryBound(to: timespec.self))
        }
    }

    /// How many regular-file names the tree holds (what a write counts as files).
    public var regularFileCount: Int {
        switch contents {
        case .bytes, .file: return 1
        case .link: return 0
        case .directory(let children): return children.values.reduce(0) { $0 + $1.regularFileCount }
        }
    }

    // MARK: - Comparing

    /// Whether the item `name` of `dir` still has this wrapper's contents and attributes
    /// (NSFileWrapper's polarity: true = unchanged). Any difference of kind, data, link
    /// destination, children, mode, owner, modification time or `user.*` attributes, or an
    /// item that cannot be read, is a change.
    public func matchesContents(of dir: CInt, name: [UInt8]) -> Bool {
        guard let other = try? FileWrapper(directory: dir, name: name) else { return false }
        return sameContents(as: other)
    }

    /// The same comparison between two wrappers.
    public func sameContents(as other: FileWrapper) -> Bool {
        guard kind == other.kind, fileAttributes == other.fileAttributes else { return false }
        switch kind {
        case .symbolicLink: return symbolicLinkDestination == other.symbolicLinkDestination
        case .regularFile:
            if case .file(let a) = contents, case .file(let b) = other.contents, a.size != b.size { return false }
            guard let mine = try? regularFileContents(), let theirs = try? other.regularFileContents() else { return false }
            return mine == theirs
        case .directory:
            guard let mine = childrenByName, let theirs = other.childrenByName, Set(mine.keys) == Set(theirs.keys) else { return false }
            for (name, child) in mine where !child.sameContents(as: theirs[name]!) { return false }
            return true
        }
    }
}
