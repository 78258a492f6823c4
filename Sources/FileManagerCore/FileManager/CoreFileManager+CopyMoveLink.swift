import Glibc
import SystemPackage

extension CoreFileManager {
    // MARK: - Copy

    /// `copyItemAtPath:toPath:` (docs/SEMANTICS.md §8.6): copies the item, a directory with all it
    /// holds (hidden files included); a symlink source is copied as a link. Data, mode, times
    /// and `user.*` xattrs are kept, and owner and group when the caller is root (`cp -a`);
    /// FIFOs, sockets and devices are recreated.
    ///
    /// The copy is assembled under a temporary name beside `destination` and renamed into
    /// place with `RENAME_NOREPLACE`: an existing destination (`itemExists`) is refused
    /// atomically and left unchanged, and a failed copy leaves nothing behind.
    ///
    /// The delegate is asked about each item; a declined item is skipped. `shouldProceedAfterError`
    /// true skips the failed item and goes on.
    ///
    /// - Returns: true, including when the delegate declined .
    @discardableResult
    public func copyItem(at source: FilePath, to destination: FilePath, caller: Caller = .current) throws(FileManagerError) -> Bool {
        try assemble(.copy, from: source, to: destination, caller: caller)
        return true
    }

    // MARK: - Link

    /// `linkItemAtPath:toPath:` (docs/SEMANTICS.md §8.6): a hard link to a file; for a directory, a
    /// new directory (with the source's mode, times and xattrs) whose files are hard-linked,
    /// recursively. Symlinks, at the top or inside, are copied, not linked. Between file
    /// systems the kernel's EXDEV becomes `crossesContainer`.
    ///
    /// Built and placed like `copyItem`: an existing destination is `itemExists`, unchanged.
    /// The delegate is asked about each item.
    ///
    /// - Returns: true, including when the delegate declined (recommended, like copy).
    @discardableResult
    public func linkItem(at source: FilePath, to destination: FilePath, caller: Caller = .current) throws(FileManagerError) -> Bool {
        try assemble(.link, from: source, to: destination, caller: caller)
        return true
    }

    /// Copies or links `source` to a temporary name beside `destination`, then renames it
    /// into place without replacing.
    private func assemble(_ operation: TreeOperation, from source: FilePath, to destination: FilePath,
                          caller: Caller) throws(FileManagerError) {
        try Self.requireRegularName(source)
        try Self.requireRegularName(destination)
        let hooks = TreeHooks(manager: self, operation: operation)
        let options = TreeCopy.Options(linksFiles: operation == .link, keepOwner: caller.isRoot, recreatesSpecialFiles: true)
        try Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: source) { srcDir, srcName throws(FileManagerError) in
                let st = try Self.attempt(source) { () throws(Errno) in try Self.lstat(srcDir, srcName) }
                try Self.withParent(of: destination) { dstDir, dstName throws(FileManagerError) in
                    // Fail fast before a long copy; the rename below decides atomically.
                    if (try? Self.lstat(dstDir, dstName)) != nil { throw .itemExists(destination.string) }
                    // A directory copied into itself would copy its own copy, without end.
                    if (st.st_mode & S_IFMT) == S_IFDIR, Self.isDirectory(st, anAncestorOf: dstDir) {
                        throw .invalidArgument(destination.string)
                    }
                    try Self.assemble(from: srcDir, srcName, at: source, to: dstDir, dstName, at: destination,
                                      options: options, hooks: hooks)
                }
            }
        }
    }

    /// The descriptor-level half of `assemble`, shared with a move between file systems.
    /// Returns whether an item was placed (false: declined, or failed and skipped).
    @discardableResult
    static func assemble(from srcDir: CInt, _ srcName: FilePath.Component, at source: FilePath,
                         to dstDir: CInt, _ dstName: FilePath.Component, at destination: FilePath,
                         options: TreeCopy.Options, hooks: TreeHooks) throws(FileManagerError) -> Bool {
        let temporary = temporaryName()
        do throws(FileManagerError) {
            guard try TreeCopy.copy(from: srcDir, srcName, at: source, to: dstDir, temporary, at: destination,
                                    options: options, hooks: hooks) else { return false }
            try attempt(destination) { () throws(Errno) in
                try temporary.withName { t throws(Errno) in
                    try dstName.withName { d throws(Errno) in try Syscall.renameat2(dstDir, t, dstDir, d, RENAME_NOREPLACE) }
                }
            }
            return true
        } catch {
            discard(dstDir, temporary)
            throw error
        }
    }

    /// Whether the directory `st` describes is `dir` or one of its ancestors, found by
    /// walking `..` up to the root and comparing device and inode (links cannot fool it).
    static func isDirectory(_ st: stat, anAncestorOf dir: CInt) -> Bool {
        guard var fd = try? Syscall.openat(dir, ".", O_PATH | O_DIRECTORY) else { return false }
        defer { Syscall.close(fd) }
        for _ in 0..<4096 {
            guard let here = try? Syscall.fstat(fd) else { return false }
            if here.st_dev == st.st_dev && here.st_ino == st.st_ino { return true }
            guard let up = try? Syscall.openat(fd, "..", O_PATH | O_DIRECTORY) else { return false }
            let above = try? Syscall.fstat(up)
            Syscall.close(fd)
            fd = up
            if let above, above.st_dev == here.st_dev && above.st_ino == here.st_ino { return false }  // the root
        }
        return false
    }

    // MARK: - Move

    /// `moveItemAtPath:toPath:` (docs/SEMANTICS.md §8.6): `renameat2` with `RENAME_NOREPLACE`, so an
    /// existing destination is refused (`itemExists`) atomically and left unchanged. A symlink
    /// moves itself. The delegate is asked once, even for a directory.
    ///
    /// Between file systems (EXDEV) the item is copied beside the destination, renamed into
    /// place, and only then the source removed, with the delegate's copy and remove questions
    /// : a failed copy leaves the source intact and no partial destination .
    ///
    /// - Returns: true, including when the delegate declined .
    @discardableResult
    public func moveItem(at source: FilePath, to destination: FilePath, caller: Caller = .current) throws(FileManagerError) -> Bool {
        try Self.requireRegularName(source)
        try Self.requireRegularName(destination)
        let delegate = self.delegate
        return try Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: source) { srcDir, srcName throws(FileManagerError) in
                _ = try Self.attempt(source) { () throws(Errno) in try Self.lstat(srcDir, srcName) }
                return try Self.withParent(of: destination) { dstDir, dstName throws(FileManagerError) in
                    if let delegate, !delegate.fileManager(self, shouldMoveItemAt: source, to: destination) { return true }
                    do throws(FileManagerError) {
                        do throws(Errno) {
                            try srcName.withName { s throws(Errno) in
                                try dstName.withName { d throws(Errno) in try Syscall.renameat2(srcDir, s, dstDir, d, RENAME_NOREPLACE) }
                            }
                        } catch .improperLink {
                            try moveAcrossFileSystems(srcDir, srcName, at: source, to: dstDir, dstName, at: destination, caller: caller)
                        } catch .fileExists {
                            throw .itemExists(destination.string)
                        } catch .invalidArgument {
                            throw .invalidArgument(destination.string)  // a directory into itself
                        } catch {
                            throw FileManagerError(error, path: source.string)
                        }
                    } catch {
                        guard let delegate, delegate.fileManager(self, shouldProceedAfterError: error, movingItemAt: source, to: destination)
                        else { throw error }
                    }
                    return true
                }
            }
        }
    }

    /// Copy, place, then remove the source: the fallback for a move between file systems.
    private func moveAcrossFileSystems(_ srcDir: CInt, _ srcName: FilePath.Component, at source: FilePath,
                                       to dstDir: CInt, _ dstName: FilePath.Component, at destination: FilePath,
                                       caller: Caller) throws(FileManagerError) {
        let options = TreeCopy.Options(keepOwner: caller.isRoot, recreatesSpecialFiles: true)
        guard try Self.assemble(from: srcDir, srcName, at: source, to: dstDir, dstName, at: destination,
                                options: options, hooks: TreeHooks(manager: self, operation: .copy)) else { return }
        var outcome = TreeRemoval.Outcome()
        try TreeRemoval.remove(srcDir, srcName, at: source, hooks: TreeHooks(manager: self, operation: .remove), outcome: &outcome)
    }
}
