import CArchive
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
    /// hears the file bytes written so far, after each member.
    @discardableResult
    public static func export(_ dir: CInt, _ name: String, to output: CInt, display: String,
                              progress: ((_ bytes: Int64) -> Void)? = nil) throws(FileManagerError) -> Int {
        guard let archive = archive_write_new() else { throw .system(.noMemory, display) }
        defer { archive_write_free(archive) }
        guard archive_write_set_format_pax_restricted(archive) == ARCHIVE_OK,
              archive_write_set_bytes_in_last_block(archive, 1) == ARCHIVE_OK,
              // SCHILY.xattr.* only, the keywords GNU tar reads (LIBARCHIVE.xattr.* it warns of).
              archive_write_set_format_option(archive, "pax", "xattrheader", "SCHILY") == ARCHIVE_OK,
              archive_write_open_fd(archive, output) == ARCHIVE_OK else {
            throw .system(.ioError, "\(display): \(message(archive))")
        }
        let top: CInt
        do { top = try Syscall.openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC) } catch {
            throw FileManagerError(error, path: display)
        }
        defer { Syscall.close(top) }
        var writer = Writer(archive: archive, display: display)
        writer.progress = progress
        try writer.add(top, path: Array(name.utf8))
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

        init(archive: OpaquePointer, display: String) {
            self.archive = archive
            self.display = display
        }

        /// The item behind `fd` (an `O_PATH` descriptor) as `path`, and below it.
        mutating func add(_ fd: CInt, path: [UInt8]) throws(FileManagerError) {
            let shown = display + Bytes.display(Array(path.drop(while: { $0 != 0x2F })))
            let st: stat
            do { st = try Syscall.fstat(fd) } catch { throw FileManagerError(error, path: shown) }
            let type = st.st_mode & S_IFMT
            guard type == S_IFREG || type == S_IFDIR || type == S_IFLNK else { return }
            guard let entry = archive_entry_new() else { throw .system(.noMemory, shown) }
            defer { archive_entry_free(entry) }
            var member = path
            if type == S_IFDIR { member.append(0x2F) }
            withCName(member) { archive_entry_copy_pathname(entry, $0) }
            archive_entry_set_mode(entry, st.st_mode)
            archive_entry_set_uid(entry, la_int64_t(st.st_uid))
            archive_entry_set_gid(entry, la_int64_t(st.st_gid))
            archive_entry_set_mtime(entry, time_t(st.st_mtim.tv_sec), Int(st.st_mtim.tv_nsec))
            if type != S_IFLNK {
                let prefix = Array("user.".utf8)
                for xname in ExtendedAttributes.names(fd) {
                    let bytes = xname.dropLast().map { UInt8(bitPattern: $0) }
                    guard bytes.starts(with: prefix), let value = ExtendedAttributes.value(fd, xname) else { continue }
                    value.withUnsafeBytes { v in archive_entry_xattr_add_entry(entry, xname, v.baseAddress, v.count) }
                }
            }
            var data: CInt = -1
            defer { if data >= 0 { Syscall.close(data) } }
            switch type {
            case S_IFLNK:
                let target: [UInt8]
                do { target = try Syscall.readlink(pathDescriptor: fd) } catch { throw FileManagerError(error, path: shown) }
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
                    do { data = try Syscall.reopen(fd, O_RDONLY | O_CLOEXEC) } catch { throw FileManagerError(error, path: shown) }
                }
            default:
                archive_entry_set_size(entry, 0)
            }
            guard archive_write_header(archive, entry) == ARCHIVE_OK else {
                throw .system(.ioError, "\(shown): \(SnapshotArchive.message(archive))")
            }
            members += 1
            if data >= 0 {
                try copyData(data, size: Int64(st.st_size), shown)
                bytes += Int64(st.st_size)
            }
            progress?(bytes)
            guard type == S_IFDIR else { return }
            let names: [FilePath.Component]
            do { names = try DirectoryStream.open(fd).allNames() } catch { throw FileManagerError(error, path: shown) }
            var children = names.map { c in c.withPlatformString { p in Array(UnsafeRawBufferPointer(start: p, count: strlen(p))) } }
            children.sort { $0.lexicographicallyPrecedes($1) }
            for child in children {
                let childFD: CInt
                do {
                    childFD = try withCName(child) { p throws(Errno) in try Syscall.openat(fd, p, O_PATH | O_NOFOLLOW | O_CLOEXEC) }
                } catch {
                    throw FileManagerError(error, path: shown + "/" + Bytes.display(child))
                }
                defer { Syscall.close(childFD) }
                var childPath = path
                childPath.append(0x2F)
                childPath.append(contentsOf: child)
                try add(childFD, path: childPath)
            }
        }

        /// Exactly `size` bytes of the file: what it holds beyond is left out, and a file
        /// that shrank meanwhile is an error (the header promised its size).
        func copyData(_ fd: CInt, size: Int64, _ shown: String) throws(FileManagerError) {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
            defer { buffer.deallocate() }
            var done: Int64 = 0
            while done < size {
                let want = Int(min(Int64(buffer.count), size - done))
                let n: Int
                do { n = try Syscall.pread(fd, UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), off_t(done)) } catch {
                    throw FileManagerError(error, path: shown)
                }
                if n == 0 { throw .system(.ioError, "\(shown): the file shrank while it was archived") }
                guard archive_write_data(archive, buffer.baseAddress, n) == n else {
                    throw .system(.ioError, "\(shown): \(SnapshotArchive.message(archive))")
                }
                done += Int64(n)
            }
        }
    }
}
