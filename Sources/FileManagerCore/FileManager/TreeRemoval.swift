import CLinux
import Glibc
import SystemPackage

/// Depth-first removal relative to directory descriptors: never follows a symlink (links
/// are unlinked, not entered), never leaves the directory it was given, lists unfiltered
/// (`._*` and dot-files included, or `rmdir` would find the directory not empty).
enum TreeRemoval {
    /// Removes the entry `name` of `dir`, recursively if it is a directory.
    static func remove(_ dir: CInt, _ name: UnsafePointer<CChar>) throws(Errno) {
        let st = try Syscall.fstatat(dir, name)
        if (st.st_mode & S_IFMT) == S_IFDIR {
            let fd = try Syscall.openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW)
            defer { Syscall.close(fd) }
            try removeContents(of: fd)
            try Syscall.unlinkat(dir, name, AT_REMOVEDIR)
        } else {
            try Syscall.unlinkat(dir, name, 0)
        }
    }

    /// Empties the directory behind `dir` (an `O_PATH` descriptor is fine).
    static func removeContents(of dir: CInt) throws(Errno) {
        let stream = try DirectoryStream.open(dir)
        for name in try stream.allNames() {
            try name.withName { p throws(Errno) in try remove(stream.fd, p) }
        }
    }
}

