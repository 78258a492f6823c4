import CArchive
import CLinux
import Glibc
import SystemPackage

/// `snapshot export`: a snapshot as a POSIX pax archive (libarchive's restricted pax: plain
/// ustar headers, extended ones only where needed), readable by GNU tar and bsdtar
/// (docs/DESIGN.md 53). Deterministic for the same tree: entries in byte order of their
/// paths, only mode, owner ids, modification time, size, link targets and `user.*`
/// attributes recorded (no names of owners, no access or change times). Names that are
/// hard links of one file are one file and links to it, as GNU tar writes them.
public enum SnapshotArchive {
    /// Writes the directory `name` of `dir` (never following links) to `output` as a pax
    /// archive whose members start with `name/`. Returns the number of members. `progress`
    /// hears the file bytes written so far, after each member. `store`: the store the
    /// snapshot is read in, where a file's data may be linked (`SnapshotData`); nil when it
    /// is read through the mount.
    @discardableResult
    public static func export(_ dir: CInt, _ name: String, to output: CInt, display: String, store: Store? = nil,
                              progress: ((_ bytes: Int64) -> Void)? = nil) throws(FileManagerError) -> Int {
        guard let archive = archive_write_new() else { throw .system(.noMemory, display) }
        defer { archive_write_free(archive) }
        guard archive_write_set_format_pax_restricted(archive) == ARCHIVE_OK,
              archive_write_set_bytes_in_last_block(archive, 1) == ARCHIVE_OK,
              // Fewer, larger writes; the bytes are the same (the last block is not padded).
              archive_write_set_bytes_per_block(archive, 1 << 16) == ARCHIVE_OK,
              // SCHILY.xattr.* only, the keywords GNU tar reads (LIBARCHIVE.xattr.* it warns of).
              archive_write_set_format_option(archive, "pax", "xattrheader", "SCHILY") == ARCHIVE_OK,
              archive_write_open_fd(archive, output) == ARCHIVE_OK else {
            throw .system(.ioError, "\(display): \(message(archive))")
        }
        var writer = Writer(archive: archive, display: display, snapshot: name, data: store?.snapshotData)
        defer { writer.buffer.deallocate() }
        writer.progress = progress
        try writer.add(dir, Array(name.utf8), path: Array(name.utf8))
        guard archive_write_close(archive) == ARCHIVE_OK else { throw .system(.ioError, "\(display): \(message(archive))") }
        return writer.members
    }

    static func message(_ archive: OpaquePointer) -> String {
        archive_error_string(archive).map { String(cString: $0) } ?? "archive error"
    }

    struct Writer {
        let archive: OpaquePointer
        let display: String
        var members = 0
        var bytes: Int64 = 0
        var progress: ((Int64) -> Void)?
        /// The first path of each file with several links.
        var firstPaths: [FileIdentity: [UInt8]] = [:]

        /// One buffer for every file's data.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        /// The snapshot's name and, read in the store, where linked file data lives.
        let snapshot: String
        let linkedData: SnapshotData?

        init(archive: OpaquePointer, display: String, snapshot: String, data: SnapshotData?) {
            self.snapshot = snapshot
            self.linkedData = data
            self.archive = archive
            self.display = display
        }

        /// `path` as errors show it: under `display`.
        func shown(_ path: [UInt8]) -> String { display + Bytes.display(Array(path.drop(while: { $0 != 0x2F }))) }

        /// The item `name` of `dir` (never following a link) as `path`, and below it. Files
        /// and directories are opened once, for reading: their attributes, data and entries
        /// come from that one descriptor (thousands of small files: every call counts).
        mutating func add(_ dir: CInt, _ name: [UInt8], path: [UInt8]) throws(FileManagerError) {
            var st = stat()
            guard withCName(name, { fstatat(dir, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0 else {
                throw FileManagerError(Errno(rawValue: errno), path: shown(path))
            }
            let type = st.st_mode & S_IFMT
            guard type == S_IFREG || type == S_IFDIR || type == S_IFLNK else { return }
            var fd: CInt = -1
            defer { if fd >= 0 { Syscall.close(fd) } }
            // A file whose data is linked (read in the store) is read from its link; its own
            // inode, a sparse placeholder, is opened only where the kernel cannot read its
            // attributes by name.
            let linked = type == S_IFREG ? linkedData?.openLinked(snapshot: snapshot, entry: UInt64(st.st_ino)) : nil
            defer { if let linked { Syscall.close(linked) } }
            if type != S_IFLNK && linked == nil {
                let flags = type == S_IFDIR ? O_RDONLY | O_DIRECTORY : O_RDONLY | O_NONBLOCK | O_NOCTTY
                fd = withCName(name) { openat(dir, $0, flags | O_NOFOLLOW | O_CLOEXEC) }
                guard fd >= 0, fstat(fd, &st) == 0 else { throw FileManagerError(Errno(rawValue: errno), path: shown(path)) }
                guard st.st_mode & S_IFMT == type else { throw .system(.ioError, "\(shown(path)): replaced while it was archived") }
            }
            guard let entry = archive_entry_new() else { throw .system(.noMemory, shown(path)) }
            defer { archive_entry_free(entry) }
            var member = path
            if type == S_IFDIR { member.append(0x2F) }
            withCName(member) { archive_entry_copy_pathname(entry, $0) }
            archive_entry_set_mode(entry, st.st_mode)
            archive_entry_set_uid(entry, la_int64_t(st.st_uid))
            archive_entry_set_gid(entry, la_int64_t(st.st_gid))
            archive_entry_set_mtime(entry, time_t(st.st_mtim.tv_sec), Int(st.st_mtim.tv_nsec))
            if fd >= 0 {
                addUserAttributes(entry, list: { clinux_flistxattr(fd, $0, $1) }, get: { clinux_fgetxattr(fd, $0, $1, $2) })
            } else if linked != nil {
                let byName = withCName(name) { p in
                    addUserAttributes(entry, list: { clinux_listxattrat(dir, p, $0, $1) }, get: { clinux_getxattrat(dir, p, $0, $1, $2) })
                }
                if !byName {
                    fd = withCName(name) { openat(dir, $0, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC) }
                    guard fd >= 0 else { throw FileManagerError(Errno(rawValue: errno), path: shown(path)) }
                    addUserAttributes(entry, list: { clinux_flistxattr(fd, $0, $1) }, get: { clinux_fgetxattr(fd, $0, $1, $2) })
                }
            }
            var data = false
            switch type {
            case S_IFLNK:
                var target = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
                let n = withCName(name) { p in
                    target.withUnsafeMutableBufferPointer { b in
                        readlinkat(dir, p, UnsafeMutableRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self), b.count)
                    }
                }
                guard n >= 0, n <= Int(PATH_MAX) else { throw FileManagerError(Errno(rawValue: n < 0 ? errno : ENAMETOOLONG), path: shown(path)) }
                target.removeSubrange(n...)
                withCName(target) { archive_entry_copy_symlink(entry, $0) }
                archive_entry_set_size(entry, 0)
            case S_IFREG:
                let identity = FileIdentity(st)
                if st.st_nlink > 1, let first = firstPaths[identity] {
                    withCName(first) { archive_entry_copy_hardlink(entry, $0) }
                    archive_entry_set_size(entry, 0)
                } else {
                    if st.st_nlink > 1 { firstPaths[identity] = path }
                    archive_entry_set_size(entry, la_int64_t(st.st_size))
                    data = true
                }
            default:
                archive_entry_set_size(entry, 0)
            }
            // WARN: a name this process's locale cannot spell in UTF-8 (any byte above 0x7F
            // in the C locale) is written as its bytes with `hdrcharset=BINARY`, as wanted.
            let written = archive_write_header(archive, entry)
            guard written == ARCHIVE_OK || written == ARCHIVE_WARN else {
                throw .system(.ioError, "\(shown(path)): \(SnapshotArchive.message(archive))")
            }
            members += 1
            if data {
                try copyData(linked ?? fd, size: Int64(st.st_size), shown(path))
                bytes += Int64(st.st_size)
            }
            progress?(bytes)
            guard type == S_IFDIR else { return }
            guard var children = Self.names(fd) else { throw FileManagerError(Errno(rawValue: errno), path: shown(path)) }
            children.sort { $0.lexicographicallyPrecedes($1) }
            for child in children {
                var childPath = path
                childPath.append(0x2F)
                childPath.append(contentsOf: child)
                try add(fd, child, path: childPath)
            }
        }

        /// `user.*` attributes of the item: `list` and `get` are flistxattr/fgetxattr on it
        /// open, or listxattrat/getxattrat on its name. False when the kernel has no such
        /// call (ENOSYS, before Linux 6.13).
        @discardableResult
        func addUserAttributes(_ entry: OpaquePointer, list: (UnsafeMutablePointer<CChar>?, Int) -> Int,
                               get: (UnsafePointer<CChar>, UnsafeMutableRawPointer?, Int) -> Int) -> Bool {
            let size = list(nil, 0)
            if size < 0 && errno == ENOSYS { return false }
            guard size > 0 else { return true }
            var names = [CChar](repeating: 0, count: size)
            let n = names.withUnsafeMutableBufferPointer { list($0.baseAddress, size) }
            guard n > 0 else { return true }
            for xname in names[0..<n].split(separator: 0) where xname.starts(with: "user.".utf8.map { CChar(bitPattern: $0) }) {
                let cName = Array(xname) + [0]
                let length = get(cName, nil, 0)
                guard length >= 0 else { continue }
                var value = [UInt8](repeating: 0, count: max(length, 1))
                let got = value.withUnsafeMutableBytes { get(cName, $0.baseAddress, length) }
                guard got >= 0 else { continue }
                value.withUnsafeBytes { v in archive_entry_xattr_add_entry(entry, cName, v.baseAddress, got) }
            }
            return true
        }

        /// The names in the directory open as `fd` (`.` and `..` left out); nil on failure.
        static func names(_ fd: CInt) -> [[UInt8]]? {
            let copy = dup(fd)
            guard copy >= 0, let stream = fdopendir(copy) else {
                if copy >= 0 { close(copy) }
                return nil
            }
            defer { closedir(stream) }
            var result: [[UInt8]] = []
            errno = 0
            while let ent = readdir(stream) {
                let name = withUnsafePointer(to: &ent.pointee.d_name) { p in
                    p.withMemoryRebound(to: UInt8.self, capacity: 256) { Array(UnsafeBufferPointer(start: $0, count: strlen(UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)))) }
                }
                if name == [0x2E] || name == [0x2E, 0x2E] { continue }
                result.append(name)
            }
            return errno == 0 ? result : nil
        }

        /// Exactly `size` bytes of the file: what it holds beyond is left out, and a file
        /// that shrank meanwhile is an error (the header promised its size).
        func copyData(_ fd: CInt, size: Int64, _ shown: @autoclosure () -> String) throws(FileManagerError) {
            var done: Int64 = 0
            while done < size {
                let want = Int(min(Int64(buffer.count), size - done))
                let n: Int
                do { n = try Syscall.pread(fd, UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), off_t(done)) } catch {
                    throw FileManagerError(error, path: shown())
                }
                if n == 0 { throw .system(.ioError, "\(shown()): the file shrank while it was archived") }
                guard archive_write_data(archive, buffer.baseAddress, n) == n else {
                    throw .system(.ioError, "\(shown()): \(SnapshotArchive.message(archive))")
                }
                done += Int64(n)
            }
        }
    }
}
