import Glibc
import SystemPackage

extension CoreFileManager {
    /// `replaceItemAtURL:withItemAtURL:backupItemName:options:resultingItemURL:`
    /// (docs/SEMANTICS.md §8.9), by the recommended algorithm:
    ///
    /// 1. Unless `.usingNewMetadataOnly`, the original's owner (where permitted), mode (when
    ///    both are the same kind of item: a file's mode would lock a directory), creation date
    ///    and `user.*` xattrs are put on the new item .
    /// 2. With `backupItemName`, an existing item of that name beside the original is removed
    ///    ; if that fails, nothing else happens.
    /// 3. `renameat2(RENAME_EXCHANGE)` swaps the two in one step (a file and a directory
    ///    too). If it fails (an unwritable parent, say) the original is untouched. Between file
    ///    systems the new item is first copied beside the original and the copy exchanged.
    /// 4. The old contents, now at the new item's path, become the backup when one is named
    ///    and `.withoutDeletingBackupItem` is given (if that rename fails, the exchange is
    ///    undone and the operation fails); otherwise they are removed (docs/SEMANTICS.md §8.9: the backup is
    ///    deleted on success *unless* that option is given).
    ///
    /// - Returns: `original`: the replacement always keeps the original's path.
    /// - Throws: for a failure after the exchange, an error naming where the old contents
    ///   remain (NSFileOriginalItemLocationKey's role).
    @discardableResult
    public func replaceItem(at original: FilePath, withItemAt newItem: FilePath, backupItemName: FilePath.Component? = nil,
                            options: ItemReplacementOptions = [], caller: Caller = .current) throws(FileManagerError) -> FilePath {
        try Self.requireRegularName(original)
        try Self.requireRegularName(newItem)
        if let backupItemName, backupItemName.kind != .regular || backupItemName == original.lastComponent {
            throw .invalidArgument(backupItemName.string)
        }
        try Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: original) { origDir, origName throws(FileManagerError) in
                try Self.withParent(of: newItem) { newDir, newName throws(FileManagerError) in
                    try Self.replace(origDir, origName, at: original, with: newDir, newName, at: newItem,
                                     backupItemName: backupItemName, options: options, caller: caller)
                }
            }
        }
        return original
    }

    private static func replace(_ origDir: CInt, _ origName: FilePath.Component, at original: FilePath,
                                with newDir: CInt, _ newName: FilePath.Component, at newItem: FilePath,
                                backupItemName: FilePath.Component?, options: ItemReplacementOptions,
                                caller: Caller) throws(FileManagerError) {
        let origFD = try attempt(original) { () throws(Errno) in try open(origDir, origName, O_PATH | O_NOFOLLOW) }
        defer { Syscall.close(origFD) }
        let newFD = try attempt(newItem) { () throws(Errno) in try open(newDir, newName, O_PATH | O_NOFOLLOW) }
        defer { Syscall.close(newFD) }
        let origStat = try attempt(original) { () throws(Errno) in try Syscall.fstat(origFD) }
        let newStat = try attempt(newItem) { () throws(Errno) in try Syscall.fstat(newFD) }
        if origStat.st_dev == newStat.st_dev && origStat.st_ino == newStat.st_ino { throw .invalidArgument(newItem.string) }

        if !options.contains(.usingNewMetadataOnly) {
            try carryMetadata(from: origFD, origStat, to: newFD, newStat, path: newItem)
        }
        if let backupItemName {
            var outcome = TreeRemoval.Outcome()
            try TreeRemoval.remove(origDir, backupItemName, at: original.removingLastComponent().appending(backupItemName),
                                   hooks: TreeHooks(), outcome: &outcome)
        }

        // Where the old contents will sit after the exchange.
        var oldDir = newDir, oldName = newName, oldPath = newItem
        do throws(Errno) {
            try exchange(newDir, newName, origDir, origName)
        } catch .improperLink {
            // Another file system: bring a copy over first, exchange that, drop the new item.
            let temporary = temporaryName()
            try TreeCopy.copy(from: newDir, newName, at: newItem, to: origDir, temporary, at: original,
                              options: TreeCopy.Options(keepOwner: caller.isRoot, recreatesSpecialFiles: true), hooks: TreeHooks())
            do throws(Errno) { try exchange(origDir, temporary, origDir, origName) } catch {
                discard(origDir, temporary)
                throw FileManagerError(error, path: original.string)
            }
            discard(newDir, newName)
            oldDir = origDir
            oldName = temporary
            oldPath = original.removingLastComponent().appending(temporary)
        } catch {
            throw FileManagerError(error, path: original.string)
        }

        if let backupItemName, options.contains(.withoutDeletingBackupItem) {
            do throws(Errno) {
                try oldName.withName { o throws(Errno) in
                    try backupItemName.withName { b throws(Errno) in try Syscall.renameat2(oldDir, o, origDir, b, RENAME_NOREPLACE) }
                }
            } catch {
                // No backup, no replacement : put the original back.
                _ = try? exchange(oldDir, oldName, origDir, origName)
                throw FileManagerError(error, path: original.string)
            }
        } else {
            var outcome = TreeRemoval.Outcome()
            try TreeRemoval.remove(oldDir, oldName, at: oldPath, hooks: TreeHooks(), outcome: &outcome)
        }
    }

    private static func exchange(_ aDir: CInt, _ a: FilePath.Component, _ bDir: CInt, _ b: FilePath.Component) throws(Errno) {
        try a.withName { x throws(Errno) in
            try b.withName { y throws(Errno) in try Syscall.renameat2(aDir, x, bDir, y, RENAME_EXCHANGE) }
        }
    }

    /// Puts the original's owner, mode, creation date and `user.*` xattrs on the new item.
    /// Owner first (chown clears setuid); the owner is best effort (only root may give a
    /// file away), the mode is not.
    private static func carryMetadata(from origFD: CInt, _ origStat: stat, to newFD: CInt, _ newStat: stat,
                                      path: FilePath) throws(FileManagerError) {
        let type = origStat.st_mode & S_IFMT
        let isSymlink = (newStat.st_mode & S_IFMT) == S_IFLNK
        if origStat.st_uid != newStat.st_uid || origStat.st_gid != newStat.st_gid {
            try? Syscall.fchown(pathDescriptor: newFD, origStat.st_uid, origStat.st_gid)
        }
        guard !isSymlink else { return }
        if type == newStat.st_mode & S_IFMT {
            try attempt(path) { () throws(Errno) in try Syscall.fchmod(pathDescriptor: newFD, origStat.st_mode & 0o7777) }
        }
        if let created = AttributeXattr.creationDate(origFD) {
            try? AttributeXattr.set(newFD, AttributeXattr.creationDate, created.description)
        }
        ExtendedAttributes.copyUser(from: origFD, to: newFD)
    }
}
