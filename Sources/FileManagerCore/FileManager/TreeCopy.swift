import CLinux
import Glibc
import SystemPackage

/// Recursive copy relative to directory descriptors, `cp -a` style: regular files (data
/// through `copy_file_range`, so the kernel may reflink), directories, symlinks (copied as
/// links, never followed); mode, times and `user.*` xattrs; owner and group when `keepOwner`.
/// FIFOs, sockets and devices are recreated when asked, otherwise skipped and reported.
///
/// The same walk builds `linkItem`'s tree: directories are made anew, symlinks copied, and
/// everything else hard-linked (docs/SEMANTICS.md §8.6).
enum TreeCopy {
    /// What to do with each item.
    struct Options {
        /// Hard-link files instead of copying their data.
        var linksFiles = false
        /// Give copies the source's owner and group (only root may; others keep their own).
        var keepOwner = false
        /// `mknod` FIFOs, sockets and devices instead of skipping them.
        var recreatesSpecialFiles = false
        /// Asked before each source directory is entered, the top one included; throws to
        /// stop the walk there (a bundle that contains the store it is copied into would be
        /// copied into itself without end).
        var checkDirectory: (_ st: stat, _ source: FilePath) throws(FileManagerError) -> Void = { _, _ in }
    }

    /// Copies (or links) the entry `srcName` of `srcDir`, known as `source`, to `dstName` in
    /// `dstDir`, known as `destination` (the names may differ: a copy is assembled under a
    /// temporary name). Asks `hooks` before each item, the top one included.
    ///
    /// Returns whether the item was made; false when it was declined, or failed and the hooks
    /// chose to go on (a skipped failure leaves nothing of the item behind).
    @discardableResult
    static func copy(from srcDir: CInt, _ srcName: FilePath.Component, at source: FilePath,
                     to dstDir: CInt, _ dstName: FilePath.Component, at destination: FilePath,
                     options: Options, hooks: TreeHooks) throws(FileManagerError) -> Bool {
        let st: stat
        do { st = try srcName.withName { p throws(Errno) in try Syscall.fstatat(srcDir, p) } } catch {
            try hooks.failed(error, at: source, source: source, destination: destination)
            return false
        }
        guard hooks.shouldProcess(source, destination) else { return false }
        let type = st.st_mode & S_IFMT
        if type == S_IFDIR {
            return try copyDirectory(st, from: srcDir, srcName, at: source, to: dstDir, dstName, at: destination,
                                     options: options, hooks: hooks)
        }
        let isSpecial = type != S_IFREG && type != S_IFLNK
        if isSpecial && !options.linksFiles && !options.recreatesSpecialFiles {
            hooks.skipped(source, type)
            return false
        }
        do {
            try srcName.withName { s throws(Errno) in
                try dstName.withName { d throws(Errno) in
                    if type == S_IFLNK {
                        try copySymlink(st, from: srcDir, s, to: dstDir, d, keepOwner: options.keepOwner)
                    } else if options.linksFiles {
                        try Syscall.linkat(srcDir, s, dstDir, d, 0)
                    } else if isSpecial {
                        try copySpecial(st, from: srcDir, s, to: dstDir, d, keepOwner: options.keepOwner)
                    } else {
                        try copyFile(st, from: srcDir, s, to: dstDir, d, keepOwner: options.keepOwner)
                    }
                }
            }
        } catch {
            // The failing call decides whose path the error names: creating is the
            // destination's problem, reading the source's.
            let destinationErrors: [Errno] = [.fileExists, .noSpace, .readOnlyFileSystem, .improperLink, .diskQuotaExceeded, .tooManyLinks]
            let onDestination = destinationErrors.contains(error)
            try hooks.failed(error, at: onDestination ? destination : source, source: source, destination: destination)
            return false
        }
        return true
    }

    private static func copyDirectory(_ st: stat, from srcDir: CInt, _ srcName: FilePath.Component, at source: FilePath,
                                      to dstDir: CInt, _ dstName: FilePath.Component, at destination: FilePath,
                                      options: Options, hooks: TreeHooks) throws(FileManagerError) -> Bool {
        try options.checkDirectory(st, source)
        // Made owner-only and writable, so the contents can go in; its mode comes last.
        do { try dstName.withName { d throws(Errno) in try Syscall.mkdirat(dstDir, d, 0o700) } } catch {
            try hooks.failed(error, at: destination, source: source, destination: destination)
            return false
        }
        let stream: DirectoryStream, dst: CInt, names: [FilePath.Component]
        do {
            stream = DirectoryStream(fd: try srcName.withName { s throws(Errno) in
                try Syscall.openat(srcDir, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK)
            })
            names = try stream.allNames()
        } catch {
            _ = try? dstName.withName { d throws(Errno) in try Syscall.unlinkat(dstDir, d, AT_REMOVEDIR) }
            try hooks.failed(error, at: source, source: source, destination: destination)
            return false
        }
        do { dst = try dstName.withName { d throws(Errno) in try Syscall.openat(dstDir, d, O_PATH | O_DIRECTORY | O_NOFOLLOW) } } catch {
            try hooks.failed(error, at: destination, source: source, destination: destination)
            return false
        }
        defer { Syscall.close(dst) }
        for name in names {
            try copy(from: stream.fd, name, at: source.appending(name), to: dst, name, at: destination.appending(name),
                     options: options, hooks: hooks)
        }
        do { try applyMetadata(st, from: stream.fd, to: dst, isSymlink: false, keepOwner: options.keepOwner) } catch {
            // The directory and its contents exist; only its metadata is off.
            try hooks.failed(error, at: destination, source: source, destination: destination)
        }
        return true
    }

    private static func copyFile(_ st: stat, from srcDir: CInt, _ s: UnsafePointer<CChar>,
                                 to dstDir: CInt, _ d: UnsafePointer<CChar>, keepOwner: Bool) throws(Errno) {
        let src = try Syscall.openat(srcDir, s, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        defer { Syscall.close(src) }
        let dst = try Syscall.openat(dstDir, d, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)
        defer { Syscall.close(dst) }
        do {
            try copyData(from: src, to: dst, size: Int(st.st_size))
            try applyMetadata(st, from: src, to: dst, isSymlink: false, keepOwner: keepOwner)
        } catch {
            _ = try? Syscall.unlinkat(dstDir, d, 0)  // no partial file behind
            throw error
        }
    }

    private static func copySymlink(_ st: stat, from srcDir: CInt, _ s: UnsafePointer<CChar>,
                                    to dstDir: CInt, _ d: UnsafePointer<CChar>, keepOwner: Bool) throws(Errno) {
        let linkFD = try Syscall.openat(srcDir, s, O_PATH | O_NOFOLLOW)
        defer { Syscall.close(linkFD) }
        var target = try Syscall.readlink(pathDescriptor: linkFD)
        target.append(0)
        try target.withUnsafeBufferPointer { b throws(Errno) in
            try Syscall.symlinkat(UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self), dstDir, d)
        }
        let path = try Syscall.openat(dstDir, d, O_PATH | O_NOFOLLOW)
        defer { Syscall.close(path) }
        try applyMetadata(st, from: linkFD, to: path, isSymlink: true, keepOwner: keepOwner)
    }

    private static func copySpecial(_ st: stat, from srcDir: CInt, _ s: UnsafePointer<CChar>,
                                    to dstDir: CInt, _ d: UnsafePointer<CChar>, keepOwner: Bool) throws(Errno) {
        let src = try Syscall.openat(srcDir, s, O_PATH | O_NOFOLLOW)
        defer { Syscall.close(src) }
        try Syscall.mknodat(dstDir, d, (st.st_mode & S_IFMT) | 0o600, st.st_rdev)
        let path = try Syscall.openat(dstDir, d, O_PATH | O_NOFOLLOW)
        defer { Syscall.close(path) }
        try applyMetadata(st, from: src, to: path, isSymlink: false, keepOwner: keepOwner)
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
