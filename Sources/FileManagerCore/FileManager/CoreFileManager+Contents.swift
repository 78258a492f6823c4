import Glibc
import SystemPackage

extension CoreFileManager {
    /// `contentsAtPath:` (docs/SEMANTICS.md §8.8): the file's bytes, following a final
    /// symlink; nil for a directory or on any error.
    public func contents(atPath path: FilePath, caller: Caller = .current) -> [UInt8]? {
        try? Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: path) { dir, name throws(FileManagerError) in
                try Self.attempt(path) { () throws(Errno) in
                    let fd = try Self.open(dir, name, O_RDONLY | O_NONBLOCK)
                    defer { Syscall.close(fd) }
                    guard (try Syscall.fstat(fd).st_mode & S_IFMT) != S_IFDIR else { throw .isDirectory }
                    return try Self.readAll(fd)
                }
            }
        }
    }

    static func readAll(_ fd: CInt) throws(Errno) -> [UInt8] {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var offset: off_t = 0
        while true {
            let n = try chunk.withMutableBytes { b throws(Errno) in try Syscall.pread(fd, b, offset) }
            if n == 0 { return result }
            result.append(contentsOf: chunk[0..<n])
            offset += off_t(n)
        }
    }

    /// `contentsEqualAtPath:andPath:` (docs/SEMANTICS.md §8.8). Links are not followed: two links
    /// are equal when their target bytes are. Files: the same inode is equal without reading,
    /// else sizes, then bytes. Directories: the same names (all of them, `._*` included),
    /// each pair equal, recursively. Special files: the same kind and device number. Any
    /// error answers false.
    public func contentsEqual(atPath path1: FilePath, andPath path2: FilePath, caller: Caller = .current) -> Bool {
        (try? Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: path1) { dir1, name1 throws(FileManagerError) in
                try Self.withParent(of: path2) { dir2, name2 throws(FileManagerError) in
                    try Self.attempt(path1) { () throws(Errno) in try Self.equal(dir1, name1, dir2, name2) }
                }
            }
        }) ?? false
    }

    private static func equal(_ dir1: CInt, _ name1: FilePath.Component, _ dir2: CInt, _ name2: FilePath.Component) throws(Errno) -> Bool {
        let st1 = try lstat(dir1, name1), st2 = try lstat(dir2, name2)
        let type = st1.st_mode & S_IFMT
        guard type == st2.st_mode & S_IFMT else { return false }
        if st1.st_dev == st2.st_dev && st1.st_ino == st2.st_ino { return true }
        switch type {
        case S_IFLNK:
            let fd1 = try open(dir1, name1, O_PATH | O_NOFOLLOW)
            defer { Syscall.close(fd1) }
            let fd2 = try open(dir2, name2, O_PATH | O_NOFOLLOW)
            defer { Syscall.close(fd2) }
            return try Syscall.readlink(pathDescriptor: fd1) == Syscall.readlink(pathDescriptor: fd2)
        case S_IFREG:
            guard st1.st_size == st2.st_size else { return false }
            let fd1 = try open(dir1, name1, O_RDONLY | O_NOFOLLOW)
            defer { Syscall.close(fd1) }
            let fd2 = try open(dir2, name2, O_RDONLY | O_NOFOLLOW)
            defer { Syscall.close(fd2) }
            return try sameBytes(fd1, fd2)
        case S_IFDIR:
            let stream1 = try DirectoryStream(fd: open(dir1, name1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW))
            let stream2 = try DirectoryStream(fd: open(dir2, name2, O_RDONLY | O_DIRECTORY | O_NOFOLLOW))
            let names1 = try stream1.allNames(), names2 = try stream2.allNames()
            guard Set(names1) == Set(names2) else { return false }
            for name in names1 where try !equal(stream1.fd, name, stream2.fd, name) { return false }
            return true
        default:
            return st1.st_rdev == st2.st_rdev
        }
    }

    private static func sameBytes(_ fd1: CInt, _ fd2: CInt) throws(Errno) -> Bool {
        let size = 64 * 1024
        let a = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { a.deallocate() }
        let b = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { b.deallocate() }
        var offset: off_t = 0
        while true {
            let n1 = try Syscall.pread(fd1, a, offset)
            var n2 = 0
            while n2 < n1 {  // a short read of one file must not look like a difference
                let n = try Syscall.pread(fd2, UnsafeMutableRawBufferPointer(rebasing: b[n2..<n1]), offset + off_t(n2))
                if n == 0 { break }
                n2 += n
            }
            if n1 != n2 { return false }
            if n1 == 0 { return (try Syscall.pread(fd2, b, offset)) == 0 }
            if memcmp(a.baseAddress!, b.baseAddress!, n1) != 0 { return false }
            offset += off_t(n1)
        }
    }
}
