import Glibc
import SystemPackage

// MARK: - Creating, linking, removing and renaming entries
//
// Each creating call runs its system call with the caller's fs uid and gid (new items
// belong to the caller, setgid directories behave as the kernel defines), then looks the
// new entry up, which hands the client one reference to it.

extension Volume {
    /// `mknod`: regular files, FIFOs, sockets and device nodes, as on ext4.
    ///
    /// Why device nodes pass: issue 2 requires every mknod errno to match ext4's, and on
    /// ext4 root (CAP_MKNOD) may make them; the issue outranks the reference's "EPERM for
    /// devices" (docs/SEMANTICS.md §8.6). Nothing is lost: the kernel has already refused callers
    /// without CAP_MKNOD (vfs_mknod) before the request gets here, the mount is `nodev` so
    /// such a node opens nothing through it, and snapshots skip devices (docs/SEMANTICS.md §4).
    public func mknod(_ parent: Item, _ name: UnsafePointer<CChar>, mode: mode_t, device: dev_t, caller: Caller) throws(Errno) -> (Item, stat) {
        let type = mode & S_IFMT
        try zone(of: parent).checkCreate(name)
        guard type == S_IFREG || type == S_IFIFO || type == S_IFSOCK || type == S_IFCHR || type == S_IFBLK || type == 0 else {
            throw .notPermitted
        }
        try Credentials.asCaller(caller) { () throws(Errno) in try Syscall.mknodat(parent.fd, name, mode, device) }
        return try created(parent, name, made: .kind(type == 0 ? S_IFREG : type))
    }

    /// `mkdir`. In `containers/` it creates a container with the standard layout (EINVAL
    /// for a bad bundle id); at the root only the caller's own `.Trash-UID` may be made.
    public func mkdir(_ parent: Item, _ name: UnsafePointer<CChar>, mode: mode_t, caller: Caller) throws(Errno) -> (Item, stat) {
        if strlen(name) > 255 { throw .fileNameTooLong }
        switch zone(of: parent) {
        case .root:
            guard let owner = Volume.trashOwner(name), owner == caller.uid else { throw .permissionDenied }
            try Credentials.asCaller(caller) { () throws(Errno) in try Syscall.mkdirat(store.trashFD, name, 0o700) }
            return try created(parent, name, made: nil)
        case .containers:
            let bytes = Array(UnsafeRawBufferPointer(start: name, count: strlen(name)))
            guard BundleIdentifier.isValid(bytes), let id = BundleIdentifier(String(decoding: bytes, as: UTF8.self)) else {
                throw .invalidArgument
            }
            do { try registry.create(id, caller: caller) } catch { throw error.errno }
            return try created(parent, name, made: nil)
        case let zone:
            try zone.checkCreate(name)
            try Credentials.asCaller(caller) { () throws(Errno) in try Syscall.mkdirat(parent.fd, name, mode) }
            return try created(parent, name, made: .kind(S_IFDIR))
        }
    }

    /// `symlink`: the target is stored as given, never validated or followed.
    public func symlink(_ target: UnsafePointer<CChar>, _ parent: Item, _ name: UnsafePointer<CChar>, caller: Caller) throws(Errno) -> (Item, stat) {
        try zone(of: parent).checkCreate(name)
        try Credentials.asCaller(caller) { () throws(Errno) in try Syscall.symlinkat(target, parent.fd, name) }
        return try created(parent, name, made: .kind(S_IFLNK))
    }

    /// `link`: a new name for a file in the same container (EXDEV between containers and
    /// from snapshots; EPERM for directories, as POSIX says).
    public func link(_ item: Item, _ newParent: Item, _ newName: UnsafePointer<CChar>) throws(Errno) -> (Item, stat) {
        if item.isDirectory { throw .notPermitted }
        try Zone.checkLink(item: zone(of: item), into: zone(of: newParent), name: newName)
        try Syscall.link(pathDescriptor: item.fd, newParent.fd, newName)
        return try created(newParent, newName, made: .inode(item.inode))
    }

    /// Looks up an entry just made; a failure here (raced away) is reported as such. Out of
    /// descriptors, the entry is removed again: the call fails whole (DESIGN.md 28). `made`:
    /// what to remove; nil for what is kept (a container, a trash directory).
    private func created(_ parent: Item, _ name: UnsafePointer<CChar>, made: Made?) throws(Errno) -> (Item, stat) {
        do {
            return try lookup(parent, name)
        } catch {
            if Volume.isDescriptorShortage(error) { unmake(parent, name, made) }
            throw error
        }
    }

    /// `unlink` of one non-directory entry.
    public func unlink(_ parent: Item, _ name: UnsafePointer<CChar>) throws(Errno) {
        try checkRemoval(parent, name, directory: false)
        // A file that lives on under another name the kernel holds is known by that one
        // afterwards (`nameRemovedThroughMount`); the name is looked at only while the
        // kernel holds files with several names.
        var linked: Item?
        if items.holdsLinkedFiles, let st = try? Syscall.fstatat(parent.fd, name), st.st_nlink > 1 {
            linked = items.item(UInt64(st.st_ino))
        }
        try Syscall.unlinkat(parent.fd, name, 0)
        if let linked { nameRemovedThroughMount(linked, parent, name) }
    }

    /// `rmdir` of one empty directory.
    public func rmdir(_ parent: Item, _ name: UnsafePointer<CChar>) throws(Errno) {
        try checkRemoval(parent, name, directory: true)
        try Syscall.unlinkat(parent.fd, name, AT_REMOVEDIR)
    }

    private func checkRemoval(_ parent: Item, _ name: UnsafePointer<CChar>, directory: Bool) throws(Errno) {
        let parentZone = zone(of: parent)
        if parent.isVirtual { throw .permissionDenied }
        if parentZone.isReadOnly { throw .readOnlyFileSystem }
        guard parentZone.mayHaveSpecialChild(named: name) else { return }  // no need to look at the child
        let st = try Syscall.fstatat(parent.fd, name)
        let childZone = parentZone.child(named: name, isDirectory: (st.st_mode & S_IFMT) == S_IFDIR, key: UInt64(st.st_ino))
        try parentZone.checkRemove(child: childZone)
    }

    /// `rename` with Linux's flags: `RENAME_NOREPLACE` (EEXIST if the target exists) and
    /// `RENAME_EXCHANGE` (swap; types may differ). Renames between containers are EXDEV;
    /// between a container and the trash they stay on one volume and keep the inode.
    public func rename(_ parent: Item, _ name: UnsafePointer<CChar>, _ newParent: Item, _ newName: UnsafePointer<CChar>, flags: UInt32) throws(Errno) {
        if parent.isVirtual || newParent.isVirtual { throw .permissionDenied }
        if strlen(newName) > 255 { throw .fileNameTooLong }
        let exchange = flags & RENAME_EXCHANGE != 0
        let sourceZone = zone(of: parent)
        let destinationZone = zone(of: newParent)
        let st = try Syscall.fstatat(parent.fd, name)
        let itemZone = sourceZone.child(named: name, isDirectory: (st.st_mode & S_IFMT) == S_IFDIR, key: UInt64(st.st_ino))
        // What the name replaces matters only where a standard directory could be there, or
        // for an exchange: elsewhere the rename spares the system call.
        var replaced: stat?
        if exchange || destinationZone.mayHaveSpecialChild(named: newName) {
            do { replaced = try Syscall.fstatat(newParent.fd, newName) } catch .noSuchFileOrDirectory { replaced = nil }
        }
        let replacedZone = replaced.map {
            destinationZone.child(named: newName, isDirectory: ($0.st_mode & S_IFMT) == S_IFDIR, key: UInt64($0.st_ino))
        }
        // A trashed container put back by a trash tool (trash-restore, gio) comes back as a
        // container, never over one; anything else moves into `containers/` only by mkdir.
        let restoresContainer = Volume.restoresContainer(item: st, from: sourceZone, to: destinationZone, newName, exchange: exchange)
        var flags = flags
        if restoresContainer {
            flags |= RENAME_NOREPLACE
        } else {
            try Zone.checkRename(item: itemZone, from: sourceZone, to: destinationZone, replacing: replacedZone,
                                 newName: newName, exchange: exchange)
        }
        defer { if restoresContainer { registry.reconcile() } }
        if exchange, let replacedZone {
            try Zone.checkRename(item: replacedZone, from: destinationZone, to: sourceZone, replacing: itemZone,
                                 newName: name, exchange: true)
        }
        if parent.inode == newParent.inode && strcmp(name, newName) == 0 {
            return try renameOntoItself(parent, name, flags: flags)
        }
        // What the destination led to, if it may be a file the kernel holds under another
        // name too, which the rename leaves in place (see the end). One `fstatat`, only
        // while the kernel holds files with several names.
        var displaced = replaced
        if displaced == nil && items.holdsLinkedFiles {
            displaced = try? Syscall.fstatat(newParent.fd, newName)
        }
        try Syscall.renameat2(parent.fd, name, newParent.fd, newName, flags)

        if let moved = items.item(UInt64(st.st_ino)) {
            // Known by another name: the kernel's entry of this one may lead to another
            // item (the store renamed this one over it, and the watcher's news had not
            // reached the kernel), which the kernel now moves to the new name, where it
            // would stay. Hard links known by another name cost a look-up of the new name.
            let (knownParent, knownName) = moved.state.withLock { ($0.parent, $0.name) }
            let knownByThisName = knownParent === parent && knownName?.withPlatformString { strcmp($0, name) == 0 } == true
            // One of the other names of a file with several moved: it stays known by its own.
            if knownByThisName || st.st_nlink < 2 || !renamedOtherName(moved, from: parent, name, to: newParent, newName) {
                relocate(moved, to: newParent, name: newName)
            }
            if !knownByThisName, let component = FilePath.Component(platformString: newName) {
                announceEntryChange(parent: newParent.inode, name: component)
            }
            // Under writeback, a file edited in the store that the kernel may have renamed
            // with its old inode (its size and times) in hand: the watcher dropped the
            // entry of the old name, which the kernel had already moved here (DESIGN.md 22).
            // Whether the kernel's inode predates the edit is the client's to know: this
            // costs a file once edited in the store one needless invalidation per rename.
            // After the relocation: a watcher that read the old placement had marked the
            // item by then.
            if kernelCachesWrites, moved.changedOutsideEpoch != 0, let component = FilePath.Component(platformString: newName) {
                dropOldInode(parent: newParent.inode, name: component)
            }
        } else if let component = FilePath.Component(platformString: newName) {
            // The kernel holds no item for what the name led to: its entry of the name was
            // stale (replaced in the store, as an editor saves, before the watcher's news
            // reached it), and it moves that entry, with the old item, to the new name,
            // which must be looked up again.
            announceEntryChange(parent: newParent.inode, name: component)
        }
        if exchange, let replaced, let other = items.item(UInt64(replaced.st_ino)) { relocate(other, to: parent, name: name) }
        // A file with other names lost this one: the kernel dropped its entry.
        if !exchange, let displaced, displaced.st_nlink > 1, displaced.st_ino != st.st_ino,
           let other = items.item(UInt64(displaced.st_ino)) {
            nameRemovedThroughMount(other, newParent, newName)
        }
    }

    /// Whether a rename is a trashed container's way back: a directory from the trash to
    /// `containers/` under a valid bundle id (`rename`).
    static func restoresContainer(item st: stat, from source: Zone, to destination: Zone,
                                  _ newName: UnsafePointer<CChar>, exchange: Bool) -> Bool {
        guard !exchange, source == .trash, destination == .containers, (st.st_mode & S_IFMT) == S_IFDIR else { return false }
        return BundleIdentifier.isValid(Array(UnsafeRawBufferPointer(start: newName, count: strlen(newName))))
    }

    /// A name renamed onto itself. The kernel asks only when its two look-ups of the name
    /// met different items: the store replaced the file between them. The store changes
    /// nothing; the kernel, which moves its entry of the old item over the new one, is told
    /// to look the name up again.
    private func renameOntoItself(_ parent: Item, _ name: UnsafePointer<CChar>, flags: UInt32) throws(Errno) {
        try Syscall.renameat2(parent.fd, name, parent.fd, name, flags)  // RENAME_NOREPLACE: EEXIST
        if let component = FilePath.Component(platformString: name) { announceEntryChange(parent: parent.inode, name: component) }
    }
}
