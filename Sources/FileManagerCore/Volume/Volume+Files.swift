import Glibc
import Synchronization
import SystemPackage

/// An open file: a real (not `O_PATH`) descriptor on the backing file, and the item.
/// Lives from `open`/`create` to `release`; the descriptor closes with it.
///
/// Sendable note: immutable after creation; the descriptor is used with positional I/O only.
public final class OpenFile: @unchecked Sendable {
    public let fd: CInt
    public let item: Item
    /// The caller asked for O_DIRECT: the kernel should not cache this handle's data. The
    /// backing descriptor itself is opened without it (a caller's unaligned buffers must
    /// never reach the backing file with O_DIRECT).
    public let direct: Bool
    public let writable: Bool
    /// The kernel must not cache this handle's data either: under writeback, its inode of
    /// the file may hold an old size (`Volume.open`).
    public let uncached: Bool
    /// The descriptor has write access: the handle counts as a change of the item under
    /// way (`Item.changesUnderWay`) for as long as it lives.
    private let changes: Bool
    /// The purpose (raw value) of the last coordinated write through this handle, 0 when
    /// none: at release, presenters hear `didChange` from it (docs/SEMANTICS.md §3.2).
    public let coordinatedWriter = Atomic<UInt64>(0)
    /// Something a client of the core tied to this handle's life (the FUSE bridge: which way
    /// the kernel does the handle's I/O, DESIGN.md 29); it goes when the handle goes.
    public let attachment = Mutex<(any AnyObject & Sendable)?>(nil)
    /// The descriptor is not the item's own file (a snapshot entry's shared data,
    /// `SnapshotData`): the kernel must not do this handle's I/O itself (passthrough).
    public let throughDaemonOnly: Bool
    /// Called with the descriptor just before it closes.
    private let closing: (@Sendable (CInt) -> Void)?

    init(fd: CInt, item: Item, direct: Bool, writable: Bool, accessMode: CInt, uncached: Bool = false,
         throughDaemonOnly: Bool = false, closing: (@Sendable (CInt) -> Void)? = nil) {
        self.fd = fd
        self.throughDaemonOnly = throughDaemonOnly
        self.closing = closing
        self.item = item
        self.direct = direct
        self.writable = writable
        self.uncached = uncached
        changes = accessMode != O_RDONLY
        if changes { item.changesUnderWay.add(1, ordering: .acquiring) }
        item.openHandles.add(1, ordering: .relaxed)
    }

    deinit {
        item.openHandles.subtract(1, ordering: .relaxed)
        closing?(fd)
        Syscall.close(fd)
        if changes { item.changesUnderWay.subtract(1, ordering: .releasing) }
    }

    public func sync(dataOnly: Bool) throws(Errno) { try Syscall.fsync(fd, dataOnly: dataOnly) }

    public func allocate(mode: CInt, offset: off_t, length: off_t) throws(Errno) {
        try Syscall.fallocate(fd, mode, offset, length)
    }

    /// `lseek` for SEEK_DATA / SEEK_HOLE (the kernel handles SEEK_SET/CUR/END itself).
    public func seek(_ offset: off_t, whence: CInt) throws(Errno) -> off_t {
        try Syscall.lseek(fd, offset, whence)
    }

    /// Server-side copy between two open files (`copy_file_range`).
    public func copyRange(from offset: off_t, to destination: OpenFile, at destinationOffset: off_t, length: Int, flags: UInt32) throws(Errno) -> Int {
        var inOff = offset, outOff = destinationOffset
        return try Syscall.copyFileRange(fd, &inOff, destination.fd, &outOff, length, flags)
    }
}

extension Volume {
    /// Flags the backing descriptor must never get: creation is done by `create`, O_DIRECT
    /// would expose the backing file to unaligned caller buffers, O_NOCTTY is meaningless.
    static let strippedOpenFlags: CInt = O_CREAT | O_EXCL | O_NOCTTY | O_DIRECT

    /// The flags of the backing descriptor for a caller's `flags`. With the kernel caching
    /// writes, a write-only file must also be readable (the kernel reads pages it partly
    /// overwrites) and O_APPEND is the kernel's business (it sends appends at their offset;
    /// on the backing file O_APPEND would move every write to the end), as passthrough_ll does
    /// — except for an `uncached` handle, whose appends the kernel would send at an end of
    /// file it may not know (`open`).
    func backingFlags(_ flags: CInt, uncached: Bool = false) -> CInt {
        guard kernelCachesWrites else { return flags }
        var f = uncached ? flags : flags & ~O_APPEND
        if f & O_ACCMODE == O_WRONLY { f = (f & ~O_ACCMODE) | O_RDWR }
        return f
    }

    /// Opens an existing file. Opening for writing (or with O_TRUNC) is a modification and
    /// is refused in the bundle and snapshots (EROFS) and in Inbox (EACCES). An O_TRUNC
    /// clears set-ID bits as `caller` would (`Credentials.clearingSetID`).
    /// Under writeback a handle is `uncached` (`OpenFile.uncached`) when the client says the
    /// kernel may hold the file's inode of before an edit made in the store (DESIGN.md 22):
    /// the kernel keeps size and times of its inode itself there and never takes the
    /// daemon's, so the handle's reads end and its appends land at the store's end of file.
    /// A truncating open makes the size 0.
    public func open(_ item: Item, flags: CInt, caller: Caller? = nil, uncached: Bool = false) throws(Errno) -> OpenFile {
        // The kernel opens FIFOs, sockets and devices itself; only a race with a change in
        // the store could bring one here, and the daemon must never open one (a FIFO would
        // block a worker, a device would hand a user the device).
        guard item.isRegularFile else {
            throw item.isDirectory ? .isDirectory : (item.isSymlink ? .tooManySymbolicLinkLevels : Errno(rawValue: ENXIO))
        }
        let writable = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) != 0
        if writable {
            try zone(of: item).checkModify()
            item.writableOpensStarting.add(1, ordering: .sequentiallyConsistent)  // see `keepSnapshotsFrozen`
        }
        defer { if writable { item.writableOpensStarting.subtract(1, ordering: .releasing) } }
        if writable { try keepSnapshotsFrozen(item) }
        if let file = try openSnapshotEntry(item, flags: flags) { return file }
        let uncached = kernelCachesWrites && uncached && flags & O_TRUNC == 0
        let fd = try sheddingOnShortage { () throws(Errno) in
            try Credentials.clearingSetID(for: flags & O_TRUNC != 0 ? caller : nil, on: item.fd) { () throws(Errno) in
                try Syscall.reopen(item.fd, backingFlags(flags & ~Volume.strippedOpenFlags, uncached: uncached) | O_NONBLOCK)
            }
        }
        return OpenFile(fd: fd, item: item, direct: flags & O_DIRECT != 0, writable: writable,
                        accessMode: flags & O_ACCMODE, uncached: uncached)
    }

    /// Before the data of a live file changes through the mount: a snapshot sharing it gets
    /// a copy of its own first (`SnapshotData.breakSharing`). The caller has counted the
    /// change first (`Item.writableOpensStarting`, or `changesUnderWay` for a setattr):
    /// a publish that links the file meanwhile finds it so and copies it itself.
    func keepSnapshotsFrozen(_ item: Item) throws(Errno) {
        guard item.isRegularFile else { return }
        try store.snapshotData.breakSharing(item.inode, live: item.fd)
    }

    /// A snapshot entry whose data is a link of a live file (`SnapshotData`) opens that link,
    /// served by the daemon only; nil for any other item.
    private func openSnapshotEntry(_ item: Item, flags: CInt) throws(Errno) -> OpenFile? {
        guard store.snapshotData.holdsData, case .snapshots = zone(of: item), let snapshot = snapshotName(of: item) else { return nil }
        let data = store.snapshotData
        guard let fd = data.openEntry(snapshot: snapshot, entry: item.inode) else { return nil }
        return OpenFile(fd: fd, item: item, direct: flags & O_DIRECT != 0, writable: false, accessMode: O_RDONLY,
                        throughDaemonOnly: true, closing: { data.closed($0) })
    }

    /// The name of the snapshot `item` is in: that of its ancestor just below `snapshots/`.
    func snapshotName(of item: Item) -> String? {
        var current = item
        while true {
            let (parent, name) = current.state.withLock { ($0.parent, $0.name) }
            guard let parent, let name else { return nil }
            if parent.state.withLock({ $0.parent?.isVirtual ?? false }) { return name.string }
            current = parent
        }
    }

    /// Whether the name the kernel resolved to `item` now leads elsewhere in the store, or
    /// nowhere: an editor saved by renaming a new file over it, or it was deleted, outside
    /// the mount, and the kernel's entry was still cached when it walked the path. Looked at
    /// only when an entry was removed or renamed outside the mount since the kernel resolved
    /// the item (`ItemTable.outsideEntryEpoch`); an item found in place is not looked at
    /// again until the next such change. An OPEN answers ESTALE when this is true, and the
    /// kernel walks the path again, asking (DESIGN.md 27). A file with several names has
    /// the kernel's other names checked too (`otherNameWentInStore`). `everyTime`: looked
    /// at whatever the epoch, for a watcher that may not hear every change (DESIGN.md 28).
    public func wasReplacedInStore(_ item: Item, everyTime: Bool = false) -> Bool {
        let epoch = items.outsideEntryEpoch.load(ordering: .acquiring)
        guard everyTime || item.resolvedEpoch.load(ordering: .relaxed) != epoch else { return false }
        let (parent, name, others) = item.state.withLock { ($0.parent, $0.name, $0.otherNames) }
        if let parent, let name, !parent.isVirtual, !leadsTo(item, parent, name) { return true }
        if !others.isEmpty && otherNameWentInStore(item, others) { return true }
        item.resolvedEpoch.store(epoch, ordering: .relaxed)
        return false
    }

    /// The count of entries removed or renamed, and (under `-o writeback`) of files changed
    /// in place, in the store outside the mount so far: a client reads it before a request
    /// that may make the kernel a new inode, and compares it with `Item.changedOutsideEpoch`.
    public var outsideChangeEpoch: UInt64 { items.outsideEntryEpoch.load(ordering: .acquiring) }

    /// Under writeback: `item`'s content or times changed outside the mount, which a kernel
    /// inode of it made before will not show (`outsideChangeEpoch`). Marked before the
    /// epoch moves, so whoever sees the new epoch sees the mark. The watcher marks: the
    /// epoch only ever grows, and two marks at once may share one.
    func markChangedOutside(_ item: Item) {
        let epoch = items.outsideEntryEpoch.load(ordering: .relaxed) &+ 1
        item.changedOutside.store(epoch, ordering: .relaxed)
        items.outsideEntryEpoch.max(epoch, ordering: .releasing)
    }

    /// Under writeback the kernel would keep the old size and times of a file for as long
    /// as it holds its inode: the entry goes, so that a next look-up makes a new inode once
    /// nobody uses the old one (never waited for: the kernel takes the directory's lock,
    /// which a request parked on a claim may hold). The client lets go of the inode's other
    /// entries itself, where the kernel can prune, when told the item changed.
    public func dropOldInode(parent: UInt64, name: FilePath.Component) {
        notify { $0.entryChanged(parent: parent, name: name) }
    }

    /// Creates and opens a new file (`open(O_CREAT)` of a missing name); O_EXCL is the
    /// kernel's business, which asks only when the name does not exist.
    public func create(_ parent: Item, _ name: UnsafePointer<CChar>, mode: mode_t, flags: CInt, caller: Caller) throws(Errno) -> (Item, stat, OpenFile) {
        if strlen(name) > 255 { throw .fileNameTooLong }
        try zone(of: parent).checkCreate(name)
        let fd: CInt
        do {
            // Always exclusive: the kernel asks to create only a name it believes missing, so
            // an existing item here means its cache was stale (a change in the store it has
            // not been told of yet). Opening that item as the daemon would skip the caller's
            // permission check and could open a FIFO (DESIGN.md, decision 21).
            fd = try sheddingOnShortage { () throws(Errno) in
                try Credentials.asCaller(caller) { () throws(Errno) in
                    try Syscall.openat(parent.fd, name, backingFlags(flags & ~(O_DIRECT | O_NOCTTY)) | O_CREAT | O_EXCL | O_NOFOLLOW, mode)
                }
            }
        } catch .fileExists where flags & O_EXCL == 0 {
            announceEntryChange(parent: parent.inode, name: FilePath.Component(platformString: name)!)
            return try openExisting(parent, name, flags: flags, caller: caller)
        }
        do {
            let (item, st) = try lookup(parent, name)
            let file = OpenFile(fd: fd, item: item, direct: flags & O_DIRECT != 0, writable: true,
                                accessMode: flags & O_ACCMODE)
            return (item, st, file)
        } catch {
            if Volume.isDescriptorShortage(error) {
                unmake(parent, name, (try? Syscall.fstat(fd)).map { .inode(UInt64($0.st_ino)) } ?? .kind(S_IFREG))
            }
            Syscall.close(fd)
            throw error
        }
    }

    /// `open(O_CREAT)` of a name that exists after all: opened as POSIX would, with the
    /// caller's own permission check (capabilities dropped), and only if it is a regular file.
    private func openExisting(_ parent: Item, _ name: UnsafePointer<CChar>, flags: CInt, caller: Caller) throws(Errno) -> (Item, stat, OpenFile) {
        // Under writeback the kernel takes a CREATE's answer for a new file's and keeps the
        // size of an inode it holds as its own (DESIGN.md 22): given a file it holds under
        // another name (linked there in the store), it would apply no O_TRUNC and keep the old
        // size, and the page it writes back past the new end would lengthen the file in the
        // store. ESTALE makes the VFS walk the path again, and the look-up it sends finds the
        // file, which it then opens (and truncates) as any existing one (DESIGN.md 38).
        if kernelCachesWrites, let found = try? Syscall.fstatat(parent.fd, name), items.item(UInt64(found.st_ino)) != nil {
            throw .staleNFSFileHandle
        }
        let (item, st) = try lookup(parent, name)
        return try handingOut(item) { () throws(Errno) in
            guard item.isRegularFile else { throw .fileExists }
            let accessFlags = (flags & ~(O_CREAT | O_EXCL | O_DIRECT | O_NOCTTY)) | O_NONBLOCK
            item.writableOpensStarting.add(1, ordering: .sequentiallyConsistent)  // see `keepSnapshotsFrozen`
            defer { item.writableOpensStarting.subtract(1, ordering: .releasing) }
            if (flags & O_ACCMODE) != O_RDONLY || flags & O_TRUNC != 0 {
                try zone(of: item).checkModify()
                try keepSnapshotsFrozen(item)
            }
            var fd = try Credentials.withAccessChecks { () throws(Errno) -> CInt in
                try Credentials.asCaller(caller) { () throws(Errno) in try Syscall.reopen(item.fd, accessFlags) }
            }
            // Checked as the caller asked; the backing descriptor is what the kernel's cache
            // needs (readable under writeback: it reads pages it partly overwrites).
            if backingFlags(accessFlags) != accessFlags {
                let checked = fd
                defer { Syscall.close(checked) }
                fd = try Syscall.reopen(item.fd, backingFlags(accessFlags & ~O_TRUNC))
            }
            // The answer tells the kernel the file as the open left it: a new inode takes its
            // size from it (under writeback for good), and the look-up's was from before O_TRUNC.
            let opened = flags & O_TRUNC != 0 ? (try? Syscall.fstat(fd)) ?? st : st
            return (item, opened, OpenFile(fd: fd, item: item, direct: flags & O_DIRECT != 0, writable: (flags & O_ACCMODE) != O_RDONLY,
                                       accessMode: flags & O_ACCMODE))
        }
    }
}
