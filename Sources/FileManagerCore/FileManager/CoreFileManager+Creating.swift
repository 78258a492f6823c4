import Glibc
import SystemPackage

extension CoreFileManager {
    // MARK: - Directories

    /// `createDirectoryAtPath:withIntermediateDirectories:attributes:` (docs/SEMANTICS.md §8.4).
    ///
    /// - Without intermediates the parent must exist (`noSuchItem`) and the directory must
    ///   not (`itemExists`); with them, missing parents are made and an existing directory
    ///   (or a link to one) is success.
    /// - A file among the parents is `notADirectory`; a file at `path` itself `itemExists`.
    /// - Mode `0o777 & ~caller.umask`, owner the caller, group by the Linux rule (the caller's,
    ///   or the parent's when it is setgid, which is then inherited too).
    /// - `attributes` land on every directory this call creates, intermediates included
    ///   ; they are applied once all exist, deepest first, so creating a child does not
    ///   move a parent's modification date and a read-only mode does not block the next level.
    public func createDirectory(at path: FilePath, withIntermediateDirectories createIntermediates: Bool,
                                attributes: FileAttributeChanges? = nil, caller: Caller = .current) throws(FileManagerError) {
        let mode = 0o777 & ~caller.umask
        try Credentials.asCaller(caller) { () throws(FileManagerError) in
            guard createIntermediates else {
                try Self.withParent(of: path) { dir, name throws(FileManagerError) in
                    try Self.requireRegularName(path)
                    let fd = try Self.attempt(path) { () throws(Errno) in try Self.makeDirectory(dir, name, mode: mode) }
                    defer { Syscall.close(fd) }
                    if let attributes { try Self.apply(attributes, to: fd, isSymlink: false, path: path) }
                }
                return
            }
            _ = try Self.split(path)  // absolute, not empty
            var opened: [CInt] = []
            var created: [(fd: CInt, path: FilePath)] = []
            defer { for fd in opened { Syscall.close(fd) } }
            var current = try Self.attempt(path) { () throws(Errno) in try Syscall.open("/", O_PATH | O_DIRECTORY) }
            opened.append(current)
            var walked = FilePath("/")
            let components = Array(path.components)
            for (index, component) in components.enumerated() {
                walked.append(component)
                let isLast = index == components.count - 1
                do throws(Errno) {
                    current = try Self.makeDirectory(current, component, mode: mode)
                    opened.append(current)
                    created.append((current, walked))
                } catch .fileExists {
                    do throws(Errno) {
                        // An existing directory, or a link to one, as `mkdir -p` takes it.
                        current = try Self.open(current, component, O_PATH | O_DIRECTORY)
                        opened.append(current)
                    } catch .notDirectory {
                        throw isLast ? .itemExists(path.string) : .notADirectory(walked.string)
                    } catch {
                        throw FileManagerError(error, path: walked.string)
                    }
                } catch {
                    throw FileManagerError(error, path: walked.string)
                }
            }
            guard let attributes else { return }
            var first: FileManagerError?
            for (fd, path) in created.reversed() {
                do throws(FileManagerError) { try Self.apply(attributes, to: fd, isSymlink: false, path: path) } catch { first = first ?? error }
            }
            if let first { throw first }
        }
    }

    /// `mkdirat` with exactly `mode`, whatever this process's umask; returns an `O_PATH`
    /// descriptor of the new directory. A setgid bit the kernel gave it (setgid parent) stays.
    static func makeDirectory(_ dir: CInt, _ name: FilePath.Component, mode: mode_t) throws(Errno) -> CInt {
        try name.withName { p throws(Errno) in try Syscall.mkdirat(dir, p, mode) }
        let fd = try open(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW)
        do {
            try setExactMode(fd, mode, keeping: S_ISGID)
        } catch {
            Syscall.close(fd)
            throw error
        }
        return fd
    }

    /// Sets the permission bits to `mode` (plus any of `keeping` the item already has), only
    /// if they differ: a needless chmod by a caller outside the item's group would drop setgid.
    static func setExactMode(_ fd: CInt, _ mode: mode_t, keeping: mode_t = 0) throws(Errno) {
        let st = try Syscall.fstat(fd)
        let wanted = (mode & 0o7777) | (st.st_mode & keeping)
        if st.st_mode & 0o7777 != wanted { try Syscall.fchmod(pathDescriptor: fd, wanted) }
    }

    // MARK: - Files

    /// `createFileAtPath:contents:attributes:` (docs/SEMANTICS.md §8.4): true if the file was created
    /// or already existed and was overwritten, false on any error (`writeFile` says which).
    @discardableResult
    public func createFile(at path: FilePath, contents: [UInt8]? = nil, attributes: FileAttributeChanges? = nil,
                           caller: Caller = .current) -> Bool {
        (try? writeFile(at: path, contents: contents ?? [], attributes: attributes, caller: caller)) != nil
    }

    /// `createFile` that throws its reason instead of answering false.
    ///
    /// - An existing regular file is truncated and rewritten **in place**: same inode, owner,
    ///   mode and links . A directory is `isADirectory`; a symlink is not followed
    ///   (`tooManySymbolicLinkLevels`, ELOOP); another kind of item is `invalidArgument`.
    /// - A new file is written, synced and given its mode (`0o666 & ~caller.umask`) and
    ///   `attributes` under a temporary name in the same directory, then renamed into place
    ///   with `RENAME_NOREPLACE`: a crash never leaves a partial file under `path`. If a file
    ///   appears meanwhile, it is overwritten in place instead, as if it had been there.
    /// - The parent must exist (Apple's documentation never says `createFile` makes parents, docs/SEMANTICS.md §8.4).
    public func writeFile(at path: FilePath, contents: [UInt8], attributes: FileAttributeChanges? = nil,
                          caller: Caller = .current) throws(FileManagerError) {
        let mode = 0o666 & ~caller.umask
        try Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: path) { dir, name throws(FileManagerError) in
                try Self.requireRegularName(path)
                while true {
                    do throws(Errno) {
                        try Self.overwrite(dir, name, contents: contents, attributes: attributes, path: path)
                        return
                    } catch .noSuchFileOrDirectory {
                        // Not there: create it below.
                    } catch .invalidArgument {
                        throw .invalidArgument(path.string)
                    } catch {
                        throw FileManagerError(error, path: path.string)
                    }
                    if try Self.createNew(dir, name, mode: mode, contents: contents, attributes: attributes, path: path) { return }
                }
            }
        }
    }

    /// Rewrites the existing regular file `name` in place. ENOENT if there is none.
    private static func overwrite(_ dir: CInt, _ name: FilePath.Component, contents: [UInt8],
                                  attributes: FileAttributeChanges?, path: FilePath) throws(Errno) {
        // O_NONBLOCK: opening a FIFO must not wait for a reader; it is refused below anyway.
        let fd = try open(dir, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK)
        defer { Syscall.close(fd) }
        guard (try Syscall.fstat(fd).st_mode & S_IFMT) == S_IFREG else { throw .invalidArgument }
        try Syscall.ftruncate(fd, 0)
        try write(contents, to: fd)
        if let attributes {
            do { try apply(attributes, to: fd, isSymlink: false, path: path) } catch { throw error.errno }
        }
    }

    /// Writes a new file under a temporary name and renames it to `name` without replacing.
    /// Returns false when `name` appeared meanwhile (the caller then overwrites it).
    private static func createNew(_ dir: CInt, _ name: FilePath.Component, mode: mode_t, contents: [UInt8],
                                  attributes: FileAttributeChanges?, path: FilePath) throws(FileManagerError) -> Bool {
        var temporary = temporaryName()
        var fd: CInt = -1
        while fd < 0 {
            do throws(Errno) {
                fd = try open(dir, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode)
            } catch .fileExists {
                temporary = temporaryName()
            } catch {
                throw FileManagerError(error, path: path.string)
            }
        }
        defer { Syscall.close(fd) }
        do {
            try attempt(path) { () throws(Errno) in
                try setExactMode(fd, mode)
                try write(contents, to: fd)
            }
            if let attributes { try apply(attributes, to: fd, isSymlink: false, path: path) }
            try attempt(path) { () throws(Errno) in
                // Data before name: otherwise a crash can leave the new name on an empty file.
                try Syscall.fsync(fd, dataOnly: true)
                try temporary.withName { t throws(Errno) in
                    try name.withName { n throws(Errno) in try Syscall.renameat2(dir, t, dir, n, RENAME_NOREPLACE) }
                }
            }
            return true
        } catch .itemExists {
            discard(dir, temporary)
            return false
        } catch {
            discard(dir, temporary)
            throw error
        }
    }

    static func write(_ bytes: [UInt8], to fd: CInt) throws(Errno) {
        try bytes.withBytes { buffer throws(Errno) in
            var done = 0
            while done < buffer.count {
                done += try Syscall.pwrite(fd, UnsafeRawBufferPointer(rebasing: buffer[done...]), off_t(done))
            }
        }
    }

    // MARK: - Symbolic links

    /// `createSymbolicLinkAtPath:withDestinationPath:` (docs/SEMANTICS.md §8.6): `destination` is
    /// stored as given, bytes unchanged, never resolved (links to places that do not exist
    /// yet are fine). Anything at `path`, a link included, is `itemExists`.
    public func createSymbolicLink(at path: FilePath, withDestinationPath destination: FilePath,
                                   caller: Caller = .current) throws(FileManagerError) {
        try Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: path) { dir, name throws(FileManagerError) in
                try Self.requireRegularName(path)
                try Self.attempt(path) { () throws(Errno) in
                    try destination.withName { target throws(Errno) in
                        try name.withName { n throws(Errno) in try Syscall.symlinkat(target, dir, n) }
                    }
                }
            }
        }
    }
}
