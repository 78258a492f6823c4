import CLinux
import Glibc
import SystemPackage

/// One entry of a directory as `getdents64` returns it. `name` points into the stream's
/// buffer and is valid only until the stream reads again.
public struct DirectoryEntry {
    public let inode: UInt64
    /// The file system's cookie for the position *after* this entry (what `telldir` says).
    public let nextOffset: Int64
    /// `DT_*` type.
    public let type: UInt8
    public let name: UnsafePointer<CChar>

    public var isDotOrDotDot: Bool {
        name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0))
    }
}

/// An open directory read with raw `getdents64`. The offsets handed out are the backing
/// file system's own cookies, stable under concurrent creation and deletion, so `seekdir`
/// and long listings through the mount never skip or repeat an untouched entry.
///
/// Not thread-safe: its owner serialises access (a directory handle's lock).
public final class DirectoryStream {
    public let fd: CInt
    private let buffer: UnsafeMutableRawPointer
    private let capacity = 32 * 1024
    private var filled = 0
    private var cursor = 0
    /// The cookie of the next entry `next()` returns.
    public private(set) var position: Int64 = 0

    /// Takes ownership of `fd`, an open (not `O_PATH`) directory descriptor.
    public init(fd: CInt) {
        self.fd = fd
        buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
    }

    deinit {
        buffer.deallocate()
        Syscall.close(fd)
    }

    /// Moves to a cookie previously returned as `nextOffset` (0 = start).
    public func seek(to offset: Int64) throws(Errno) {
        guard offset != position else { return }
        _ = try Syscall.lseek(fd, off_t(offset), SEEK_SET)
        filled = 0
        cursor = 0
        position = offset
    }

    func resetBuffer(position: Int64) {
        filled = 0
        cursor = 0
        self.position = position
    }

    /// The next entry, or nil at the end.
    public func next() throws(Errno) -> DirectoryEntry? {
        if cursor >= filled {
            while true {
                let n = clinux_getdents64(fd, buffer, capacity)
                if n < 0 {
                    if Glibc.errno == EINTR { continue }
                    throw Errno(rawValue: Glibc.errno)
                }
                if n == 0 { return nil }
                filled = n
                cursor = 0
                break
            }
        }
        let base = buffer + cursor
        let raw = base.assumingMemoryBound(to: clinux_dirent64.self)
        cursor += Int(raw.pointee.d_reclen)
        position = raw.pointee.d_off
        // d_name follows d_type at byte 19 (a flexible array member Swift does not import).
        let name = UnsafeRawPointer(base + 19).assumingMemoryBound(to: CChar.self)
        return DirectoryEntry(inode: raw.pointee.d_ino, nextOffset: raw.pointee.d_off, type: raw.pointee.d_type, name: name)
    }

    /// Every name but `.` and `..`, copied: for the core's own whole-directory walks.
    public func allNames() throws(Errno) -> [FilePath.Component] {
        try seek(to: 0)
        var result: [FilePath.Component] = []
        while let entry = try next() {
            if !entry.isDotOrDotDot, let c = FilePath.Component(platformString: entry.name) { result.append(c) }
        }
        return result
    }

    /// Opens the directory behind `dir` (an `O_PATH` descriptor is fine) for reading.
    ///
    /// `touchingAccessTime` is for listings a caller asked for (readdir through the mount);
    /// the daemon's own walks (watching, purging, copying) must leave the access time as the
    /// user left it, as they would on ext4 (O_NOATIME, where the daemon may use it).
    public static func open(_ dir: CInt, touchingAccessTime: Bool = false) throws(Errno) -> DirectoryStream {
        if !touchingAccessTime, let fd = try? Syscall.openat(dir, ".", O_RDONLY | O_DIRECTORY | O_NOATIME) {
            return DirectoryStream(fd: fd)
        }
        return DirectoryStream(fd: try Syscall.openat(dir, ".", O_RDONLY | O_DIRECTORY))
    }
}
