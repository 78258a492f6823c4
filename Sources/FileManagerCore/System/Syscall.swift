import CLinux
import Glibc
import SystemPackage

/// The core's only door to the kernel: thin wrappers over the `*at()` family that retry
/// `EINTR` and throw the errno as a typed `Errno` (no existential boxing on the hot path).
///
/// Every call names a directory descriptor and one path component, never a path: the
/// daemon cannot be led out of the store by `..` or a symlink in a name (docs/SEMANTICS.md §6).
/// Final components are opened `O_NOFOLLOW`.
public enum Syscall {
    /// Runs `body` until it does not fail with `EINTR`; a negative result throws `errno`.
    /// Generic over the result (`CInt` for most calls, `Int` for sizes); always inlined, so
    /// each caller gets its own specialised loop.
    @inline(__always)
    static func check<Result: SignedInteger>(_ body: () -> Result) throws(Errno) -> Result {
        while true {
            let rc = body()
            if rc >= 0 { return rc }
            let e = Glibc.errno
            if e == EINTR { continue }
            throw Errno(rawValue: e)
        }
    }

    // MARK: - Opening and closing

    public static func openat(_ dir: CInt, _ name: UnsafePointer<CChar>, _ flags: CInt, _ mode: mode_t = 0) throws(Errno) -> CInt {
        try check { clinux_openat(dir, name, flags | O_CLOEXEC, mode) }
    }

    public static func open(_ path: UnsafePointer<CChar>, _ flags: CInt, _ mode: mode_t = 0) throws(Errno) -> CInt {
        try check { clinux_open(path, flags | O_CLOEXEC, mode) }
    }

    /// Reopens an `O_PATH` descriptor with real access flags, through `/proc/self/fd`, as
    /// passthrough_ll does: the only race-free way to turn a path descriptor into an I/O one.
    public static func reopen(_ fd: CInt, _ flags: CInt) throws(Errno) -> CInt {
        try withProcPath(fd) { path throws(Errno) in try open(path, flags & ~O_NOFOLLOW) }
    }

    public static func close(_ fd: CInt) {
        _ = Glibc.close(fd)  // never retried: Linux closes the descriptor even on EINTR
    }

    // MARK: - Attributes

    public static func fstat(_ fd: CInt) throws(Errno) -> stat {
        var st = stat()
        _ = try check { Glibc.fstat(fd, &st) }
        return st
    }

    public static func fstatat(_ dir: CInt, _ name: UnsafePointer<CChar>, _ flags: CInt = AT_SYMLINK_NOFOLLOW) throws(Errno) -> stat {
        var st = stat()
        _ = try check { Glibc.fstatat(dir, name, &st, flags) }
        return st
    }

    public static func fchmod(pathDescriptor fd: CInt, _ mode: mode_t) throws(Errno) {
        _ = try withProcPath(fd) { path throws(Errno) in try check { Glibc.chmod(path, mode) } }
    }

    public static func fchown(pathDescriptor fd: CInt, _ uid: uid_t, _ gid: gid_t) throws(Errno) {
        _ = try check { clinux_fchownat_empty_path(fd, uid, gid) }
    }

    public static func utimens(pathDescriptor fd: CInt, isSymlink: Bool, _ times: UnsafePointer<timespec>) throws(Errno) {
        if isSymlink {
            do { _ = try check { clinux_utimensat_empty_path(fd, times) } } catch {
                throw error == .invalidArgument ? .notPermitted : error
            }
        } else {
            _ = try withProcPath(fd) { path throws(Errno) in try check { Glibc.utimensat(AT_FDCWD, path, times, 0) } }
        }
    }

    public static func truncate(pathDescriptor fd: CInt, _ size: off_t) throws(Errno) {
        _ = try withProcPath(fd) { path throws(Errno) in try check { Glibc.truncate(path, size) } }
    }

    /// The soft limit on this process's open descriptors (RLIMIT_NOFILE).
    static func descriptorLimit() -> UInt64 {
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        return UInt64(limit.rlim_cur)
    }

    public static func fstatvfs(_ fd: CInt) throws(Errno) -> statvfs {
        var sv = statvfs()
        _ = try check { Glibc.fstatvfs(fd, &sv) }
        return sv
    }

    // MARK: - Namespace

    public static func mkdirat(_ dir: CInt, _ name: UnsafePointer<CChar>, _ mode: mode_t) throws(Errno) {
        _ = try check { Glibc.mkdirat(dir, name, mode) }
    }

    public static func mknodat(_ dir: CInt, _ name: UnsafePointer<CChar>, _ mode: mode_t, _ dev: dev_t) throws(Errno) {
        _ = try check { Glibc.mknodat(dir, name, mode, dev) }
    }

    public static func symlinkat(_ target: UnsafePointer<CChar>, _ dir: CInt, _ name: UnsafePointer<CChar>) throws(Errno) {
        _ = try check { Glibc.symlinkat(target, dir, name) }
    }

    public static func unlinkat(_ dir: CInt, _ name: UnsafePointer<CChar>, _ flags: CInt) throws(Errno) {
        _ = try check { Glibc.unlinkat(dir, name, flags) }
    }

    public static func renameat2(_ olddir: CInt, _ old: UnsafePointer<CChar>, _ newdir: CInt, _ new: UnsafePointer<CChar>, _ flags: UInt32) throws(Errno) {
        _ = try check { clinux_renameat2(olddir, old, newdir, new, flags) }
    }

    /// Hard-links the item behind an `O_PATH` descriptor (`AT_EMPTY_PATH` needs
    /// CAP_DAC_READ_SEARCH; the `/proc` form works for the daemon's own user too).
    public static func link(pathDescriptor fd: CInt, _ newdir: CInt, _ new: UnsafePointer<CChar>) throws(Errno) {
        _ = try withProcPath(fd) { path throws(Errno) in
            try check { Glibc.linkat(AT_FDCWD, path, newdir, new, AT_SYMLINK_FOLLOW) }
        }
    }

    public static func readlink(pathDescriptor fd: CInt) throws(Errno) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = try check {
            buffer.withUnsafeMutableBufferPointer { b in
                Glibc.readlinkat(fd, "", UnsafeMutableRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self), b.count)
            }
        }
        if n > Int(PATH_MAX) { throw .fileNameTooLong }
        buffer.removeSubrange(n...)
        return buffer
    }

    // MARK: - Data

    public static func pread(_ fd: CInt, _ buffer: UnsafeMutableRawBufferPointer, _ offset: off_t) throws(Errno) -> Int {
        try check { Glibc.pread(fd, buffer.baseAddress, buffer.count, offset) }
    }

    public static func pwrite(_ fd: CInt, _ buffer: UnsafeRawBufferPointer, _ offset: off_t) throws(Errno) -> Int {
        try check { Glibc.pwrite(fd, buffer.baseAddress, buffer.count, offset) }
    }

    public static func ftruncate(_ fd: CInt, _ size: off_t) throws(Errno) {
        _ = try check { Glibc.ftruncate(fd, size) }
    }

    public static func fsync(_ fd: CInt, dataOnly: Bool) throws(Errno) {
        _ = try check { dataOnly ? Glibc.fdatasync(fd) : Glibc.fsync(fd) }
    }

    public static func fallocate(_ fd: CInt, _ mode: CInt, _ offset: off_t, _ length: off_t) throws(Errno) {
        _ = try check { clinux_fallocate(fd, mode, offset, length) }
    }

    public static func lseek(_ fd: CInt, _ offset: off_t, _ whence: CInt) throws(Errno) -> off_t {
        while true {
            let rc = Glibc.lseek(fd, offset, whence)
            if rc >= 0 { return rc }
            if Glibc.errno == EINTR { continue }
            throw Errno(rawValue: Glibc.errno)
        }
    }

    public static func copyFileRange(_ inFD: CInt, _ inOffset: inout off_t, _ outFD: CInt, _ outOffset: inout off_t, _ length: Int, _ flags: UInt32) throws(Errno) -> Int {
        try check { clinux_copy_file_range(inFD, &inOffset, outFD, &outOffset, length, flags) }
    }

    // MARK: - Extended attributes (through /proc: f*xattr refuses O_PATH descriptors)

    public static func getxattr(pathDescriptor fd: CInt, _ name: UnsafePointer<CChar>, _ buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try withProcPath(fd) { path throws(Errno) in
            try check { clinux_getxattr(path, name, buffer.baseAddress, buffer.count) }
        }
    }

    public static func listxattr(pathDescriptor fd: CInt, _ buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try withProcPath(fd) { path throws(Errno) in
            try check { clinux_listxattr(path, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), buffer.count) }
        }
    }

    public static func setxattr(pathDescriptor fd: CInt, _ name: UnsafePointer<CChar>, _ value: UnsafeRawBufferPointer, _ flags: CInt) throws(Errno) {
        _ = try withProcPath(fd) { path throws(Errno) in
            try check { clinux_setxattr(path, name, value.baseAddress, value.count, flags) }
        }
    }

    public static func removexattr(pathDescriptor fd: CInt, _ name: UnsafePointer<CChar>) throws(Errno) {
        _ = try withProcPath(fd) { path throws(Errno) in try check { clinux_removexattr(path, name) } }
    }

    // MARK: - Helpers

    /// Calls `body` with `/proc/self/fd/<fd>` in a stack buffer: no allocation, no String.
    @inline(__always)
    public static func withProcPath<R>(_ fd: CInt, _ body: (UnsafePointer<CChar>) throws(Errno) -> R) throws(Errno) -> R {
        var storage: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)  // 32 bytes, zeroed
        return try withUnsafeMutableBytes(of: &storage) { raw throws(Errno) -> R in
            let prefix: StaticString = "/proc/self/fd/"
            let p = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var i = 0
            prefix.withUTF8Buffer { b in for byte in b { p[i] = byte; i += 1 } }
            var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            var n = Int(fd), count = 0
            withUnsafeMutableBytes(of: &digits) { d in
                repeat { d[count] = UInt8(48 + n % 10); n /= 10; count += 1 } while n > 0
                while count > 0 { count -= 1; p[i] = d[count]; i += 1 }
            }
            p[i] = 0
            return try body(UnsafeRawPointer(p).assumingMemoryBound(to: CChar.self))
        }
    }
}

extension Syscall {
    public static func fchmodat(_ dir: CInt, _ name: UnsafePointer<CChar>, _ mode: mode_t) throws(Errno) {
        _ = try check { Glibc.fchmodat(dir, name, mode, 0) }
    }

    public static func fchownat(_ dir: CInt, _ name: UnsafePointer<CChar>, _ uid: uid_t, _ gid: gid_t) throws(Errno) {
        _ = try check { Glibc.fchownat(dir, name, uid, gid, AT_SYMLINK_NOFOLLOW) }
    }
}

// MARK: - CoreFileManager additions

extension Syscall {
    /// The birth time `statx(2)` reports (`STATX_BTIME`), through `clinux_birth_time`; nil
    /// where the file system keeps none.
    public static func birthTime(_ dir: CInt, _ name: UnsafePointer<CChar>, _ flags: CInt) throws(Errno) -> timespec? {
        var seconds: Int64 = 0
        var nanoseconds: UInt32 = 0
        let found = try check { clinux_birth_time(dir, name, flags, &seconds, &nanoseconds) }
        return found == 0 ? nil : timespec(tv_sec: Int(seconds), tv_nsec: Int(nanoseconds))
    }

    /// `linkat(2)`; `flags` 0 links a final symlink itself, never its target.
    public static func linkat(_ olddir: CInt, _ old: UnsafePointer<CChar>, _ newdir: CInt, _ new: UnsafePointer<CChar>, _ flags: CInt) throws(Errno) {
        _ = try check { Glibc.linkat(olddir, old, newdir, new, flags) }
    }

    /// `faccessat(2)`; with `flags` 0 the kernel checks the *real* uid and gid (what
    /// `isReadableFile` and its siblings promise, docs/SEMANTICS.md §8.7).
    public static func faccessat(_ dir: CInt, _ name: UnsafePointer<CChar>, _ mode: CInt, _ flags: CInt) throws(Errno) {
        _ = try check { Glibc.faccessat(dir, name, mode, flags) }
    }

    /// The supplementary groups of the calling process.
    public static func supplementaryGroups() -> [gid_t] {
        let count = Glibc.getgroups(0, nil)
        guard count > 0 else { return [] }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let n = groups.withUnsafeMutableBufferPointer { Glibc.getgroups(count, $0.baseAddress) }
        return n > 0 ? Array(groups[0..<Int(n)]) : []
    }
}
