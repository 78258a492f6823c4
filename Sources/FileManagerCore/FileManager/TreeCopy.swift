import Glibc
import SystemPackage

/// Recursive copy relative to directory descriptors, `cp -a` style: regular files (data
/// through `copy_file_range`, so the kernel may reflink), directories, symlinks (copied as
/// links, never followed); mode, times and `user.*` xattrs; owner and group when `keepOwner`.
/// FIFOs, sockets and devices are skipped and reported through `skipped`.
enum TreeCopy {
    static func copy(from srcDir: CInt, _ srcName: UnsafePointer<CChar>,
                     to dstDir: CInt, _ dstName: UnsafePointer<CChar>,
                     keepOwner: Bool, skipped: (String) -> Void = { _ in }) throws(Errno) {
        let st = try Syscall.fstatat(srcDir, srcName)
        switch st.st_mode & S_IFMT {
        case S_IFDIR:
            try Syscall.mkdirat(dstDir, dstName, 0o700)
            let src = try Syscall.openat(srcDir, srcName, O_PATH | O_DIRECTORY | O_NOFOLLOW)
            defer { Syscall.close(src) }
            let dst = try Syscall.openat(dstDir, dstName, O_PATH | O_DIRECTORY | O_NOFOLLOW)
            defer { Syscall.close(dst) }
            let stream = try DirectoryStream.open(src)
            for name in try stream.allNames() {
                try name.withName { p throws(Errno) in
                    try copy(from: src, p, to: dst, p, keepOwner: keepOwner, skipped: skipped)
                }
            }
            try applyMetadata(st, from: src, to: dst, isSymlink: false, keepOwner: keepOwner)
        case S_IFREG:
            let src = try Syscall.openat(srcDir, srcName, O_RDONLY | O_NOFOLLOW)
            defer { Syscall.close(src) }
            let dst = try Syscall.openat(dstDir, dstName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
            defer { Syscall.close(dst) }
            try copyData(from: src, to: dst, size: Int(st.st_size))
            let path = try Syscall.openat(dstDir, dstName, O_PATH | O_NOFOLLOW)
            defer { Syscall.close(path) }
            try applyMetadata(st, from: src, to: path, isSymlink: false, keepOwner: keepOwner)
        case S_IFLNK:
            let linkFD = try Syscall.openat(srcDir, srcName, O_PATH | O_NOFOLLOW)
            defer { Syscall.close(linkFD) }
            var target = try Syscall.readlink(pathDescriptor: linkFD)
            target.append(0)
            try target.withUnsafeBufferPointer { b throws(Errno) in
                try Syscall.symlinkat(UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self), dstDir, dstName)
            }
            let path = try Syscall.openat(dstDir, dstName, O_PATH | O_NOFOLLOW)
            defer { Syscall.close(path) }
            try applyMetadata(st, from: linkFD, to: path, isSymlink: true, keepOwner: keepOwner)
        default:
            skipped(String(cString: srcName))
        }
    }

    static func copyData(from src: CInt, to dst: CInt, size: Int) throws(Errno) {
        var inOff: off_t = 0, outOff: off_t = 0
        var remaining = size
        while remaining > 0 {
            let n: Int
            do {
                n = try Syscall.copyFileRange(src, &inOff, dst, &outOff, remaining, 0)
            } catch .improperLink, .invalidArgument, .notSupported, .noFunction {
                try copyDataByReading(from: src, to: dst, from: inOff)
                return
            }
            if n == 0 { break }  // the file shrank meanwhile
            remaining -= n
        }
    }

    private static func copyDataByReading(from src: CInt, to dst: CInt, from start: off_t) throws(Errno) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var off = start
        while true {
            let n = try Syscall.pread(src, buffer, off)
            if n == 0 { return }
            var done = 0
            while done < n {
                done += try Syscall.pwrite(dst, UnsafeRawBufferPointer(rebasing: buffer[done..<n]), off + off_t(done))
            }
            off += off_t(n)
        }
    }

    /// Owner before mode (chown clears setuid), times last.
    static func applyMetadata(_ st: stat, from source: CInt, to fd: CInt, isSymlink: Bool, keepOwner: Bool) throws(Errno) {
        if keepOwner { try? Syscall.fchown(pathDescriptor: fd, st.st_uid, st.st_gid) }
        if !isSymlink {
            try Syscall.fchmod(pathDescriptor: fd, st.st_mode & 0o7777)
            ExtendedAttributes.copyUser(from: source, to: fd)
        }
        var times = (st.st_atim, st.st_mtim)
        try withUnsafePointer(to: &times) { p throws(Errno) in
            try Syscall.utimens(pathDescriptor: fd, isSymlink: isSymlink, UnsafeRawPointer(p).assumingMemoryBound(to: timespec.self))
        }
    }
}

/// `user.*` extended attributes of items behind `O_PATH` descriptors.
enum ExtendedAttributes {
    /// Names in a `listxattr` buffer.
    static func names(_ fd: CInt) -> [[CChar]] {
        var size = 1024
        while true {
            var buffer = [CChar](repeating: 0, count: size)
            let n: Int
            do {
                n = try buffer.withUnsafeMutableBytes { b throws(Errno) in try Syscall.listxattr(pathDescriptor: fd, b) }
            } catch .outOfRange {
                size *= 4
                continue
            } catch {
                return []
            }
            return buffer[0..<n].split(separator: 0).map { Array($0) + [0] }
        }
    }

    static func value(_ fd: CInt, _ name: [CChar]) -> [UInt8]? {
        var size = 256
        while true {
            var buffer = [UInt8](repeating: 0, count: size)
            do {
                let n = try buffer.withUnsafeMutableBytes { b throws(Errno) in try Syscall.getxattr(pathDescriptor: fd, name, b) }
                return Array(buffer[0..<n])
            } catch .outOfRange {
                size *= 4
            } catch {
                return nil
            }
        }
    }

    /// Copies the source's `user.*` attributes.
    static func copyUser(from src: CInt, to dst: CInt) {
        for name in names(src) where name.starts(with: Array("user.".utf8CString.dropLast())) {
            guard let v = value(src, name) else { continue }
            v.withUnsafeBytes { b in _ = try? Syscall.setxattr(pathDescriptor: dst, name, b, 0) }
        }
    }
}
