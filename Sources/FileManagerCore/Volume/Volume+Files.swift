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
    /// the file may hold an old size (`Volume.kernelMayHoldOldState`, `pagesPredateContent`).
    public let uncached: Bool
    /// The kernel's cached pages of the file may predate its content: the open keeps none
    /// (`Volume.pagesPredateContent`).
    public let pagesStale: Bool
    /// Set when the descriptor has write access: its close echoes as IN_CLOSE_WRITE, which
    /// is the daemon's own only if nothing changed the file after the daemon's last write
    /// through it (`wrote`, `OwnChanges.closingItem`).
    private let ownChanges: OwnChanges?
    /// The kernel writes to the backing file itself (FUSE passthrough, DESIGN.md 29): the
    /// daemon sees none of those writes, so the state at close is taken as its own.
    public let writesUnseen = Atomic<Bool>(false)
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

    /// `state`: the item's state now, when the caller has it (saves an `fstat`); `mark`:
    /// the inotify queue's position before the open, if the open itself changed the item
    /// (a creation, a truncation: under passthrough the kernel's own file may close before
    /// RELEASE, DESIGN.md 29), else `.max` (the close marks it, `OwnChanges.closingItem`).
    /// A handle with write access records the state it opened in; a read-only one only a
    /// change its open made.
    init(fd: CInt, item: Item, direct: Bool, writable: Bool, accessMode: CInt, ownChanges: OwnChanges,
         state: stat? = nil, mark: UInt64 = .max, pagesStale: Bool = false, uncached: Bool = false,
         throughDaemonOnly: Bool = false, closing: (@Sendable (CInt) -> Void)? = nil) {
        self.fd = fd
        self.throughDaemonOnly = throughDaemonOnly
        self.closing = closing
        self.item = item
        self.direct = direct
        self.writable = writable
        self.pagesStale = pagesStale
        self.uncached = uncached
        self.ownChanges = accessMode != O_RDONLY ? ownChanges : nil
        self.ownChanges?.changing(item, true)
        if self.ownChanges != nil || mark != .max {  // the state its close will be compared with
            if let state { ownChanges.recordItem(item.inode, state, after: mark) }
            else { ownChanges.recordItem(item.inode, descriptor: fd, after: mark) }
        }
        item.openHandles.add(1, ordering: .relaxed)
    }

    deinit {
        item.openHandles.subtract(1, ordering: .relaxed)
        if let ownChanges {  // the close echoes as IN_CLOSE_WRITE
            if writesUnseen.load(ordering: .relaxed) {
                // The kernel wrote to the backing file itself, past its FUSE pages.
                ownChanges.recordItem(item.inode, descriptor: fd, after: 0)
                item.pagesShow.store(ContentStamp.unknown, ordering: .relaxed)
            } else if let st = ownChanges.closingItem(item.inode, descriptor: fd) {
                // The content its writes left, which went through the kernel's pages, unless
                // someone else changed the file between them.
                var shown = item.pagesShow.load(ordering: .relaxed)
                while shown != ContentStamp.doubtful {
                    let (done, now) = item.pagesShow.compareExchange(expected: shown, desired: ContentStamp.of(st), ordering: .relaxed)
                    if done { break }
                    shown = now
                }
            }
        }
        closing?(fd)
        Syscall.close(fd)
        ownChanges?.changing(item, false)
    }

    /// Before a write through this handle: what `wrote` needs to know of the state the
    /// write starts from (`OwnChanges.beforeWrite`: nil unless an attribute change of the
    /// daemon's has an echo still to come); the kernel's pages are put in doubt if the file
    /// is not in the state the daemon's last change left.
    public func writeStarts() -> stat? {
        guard let ownChanges else { return nil }
        let (start, continues) = ownChanges.beforeWrite(item.inode, descriptor: fd)
        if !continues { item.pagesShow.store(ContentStamp.doubtful, ordering: .relaxed) }
        return start
    }

    /// The daemon wrote through this handle: records the state the write left, which the
    /// handle's close echoes (`OwnChanges.closingItem`). Called by the FUSE bridge after each
    /// WRITE, and here by `allocate` and `copyRange`; always before the answer, since an
    /// edit the writer makes once its write returned must not be recorded as the daemon's.
    /// `start`: what `writeStarts` said before the write.
    public func wrote(from start: stat? = nil) { ownChanges?.recordWrite(item.inode, descriptor: fd, before: start) }

    public func sync(dataOnly: Bool) throws(Errno) { try Syscall.fsync(fd, dataOnly: dataOnly) }

    public func allocate(mode: CInt, offset: off_t, length: off_t) throws(Errno) {
        let start = writeStarts()
        try Syscall.fallocate(fd, mode, offset, length)
        wrote(from: start)
    }

    /// `lseek` for SEEK_DATA / SEEK_HOLE (the kernel handles SEEK_SET/CUR/END itself).
    public func seek(_ offset: off_t, whence: CInt) throws(Errno) -> off_t {
        try Syscall.lseek(fd, offset, whence)
    }

    /// Server-side copy between two open files (`copy_file_range`).
    public func copyRange(from offset: off_t, to destination: OpenFile, at destinationOffset: off_t, length: Int, flags: UInt32) throws(Errno) -> Int {
        var inOff = offset, outOff = destinationOffset
        let start = destination.writeStarts()
        let n = try Syscall.copyFileRange(fd, &inOff, destination.fd, &outOff, length, flags)
        destination.wrote(from: start)
        return n
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
    /// file it may not know (`kernelMayHoldOldState`).
    func backingFlags(_ flags: CInt, uncached: Bool = false) -> CInt {
        guard kernelCachesWrites else { return flags }
        var f = uncached ? flags : flags & ~O_APPEND
        if f & O_ACCMODE == O_WRONLY { f = (f & ~O_ACCMODE) | O_RDWR }
        return f
    }

    /// Opens an existing file. Opening for writing (or with O_TRUNC) is a modification and
    /// is refused in the bundle and snapshots (EROFS) and in Inbox (EACCES). An O_TRUNC
    /// clears set-ID bits as `caller` would (`Credentials.clearingSetID`).
    /// Under writeback a handle is uncached (`OpenFile.uncached`) while the kernel may hold
    /// the file's inode of before an edit made in the store (`kernelMayHoldOldState`).
    public func open(_ item: Item, flags: CInt, caller: Caller? = nil) throws(Errno) -> OpenFile {
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
        let mark = flags & O_TRUNC != 0 ? ownChanges.queuePosition() : .max
        // A truncating open replaces the content: the kernel drops its pages itself.
        let (st, pagesStale) = flags & O_TRUNC == 0 ? pagesPredateContent(item) : (nil, false)
        // Under writeback the kernel may still hold the inode of before an edit made in the
        // store, with the old size (DESIGN.md 22): the handle is uncached, its reads end and
        // its appends land at the store's end of file. A truncating open makes the size 0.
        let uncached = flags & O_TRUNC == 0 && kernelMayHoldOldState(item)
        let fd = try sheddingOnShortage { () throws(Errno) in
            try Credentials.clearingSetID(for: flags & O_TRUNC != 0 ? caller : nil, on: item.fd) { () throws(Errno) in
                try Syscall.reopen(item.fd, backingFlags(flags & ~Volume.strippedOpenFlags, uncached: uncached) | O_NONBLOCK)
            }
        }
        // A truncation is the daemon's own change, recorded by the handle at once, marked
        // as of before it: under FUSE passthrough the kernel's own file, closing before
        // RELEASE, echoes before the handle's close (DESIGN.md 29).
        return OpenFile(fd: fd, item: item, direct: flags & O_DIRECT != 0, writable: writable,
                        accessMode: flags & O_ACCMODE, ownChanges: ownChanges, state: st, mark: mark,
                        pagesStale: pagesStale, uncached: uncached)
    }

    /// Before the data of a live file changes through the mount: a snapshot sharing it gets
    /// a copy of its own first (`SnapshotData.breakSharing`). The caller has counted the
    /// change first (`Item.writableOpensStarting`, or `ownChangesUnderWay` for a setattr):
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
                        ownChanges: ownChanges, throughDaemonOnly: true, closing: { data.closed($0) })
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

    /// Whether the kernel's cached pages of `item` may predate its content: a program in the
    /// store changed it and has not closed it yet (the watcher hears a write at its close,
    /// and a `truncate(2)` by path never), or closed it just as the daemon's own handle
    /// closed, when inotify may merge the two identical events into one that reads as the
    /// daemon's echo (a coherence fuzzer, DESIGN.md 14). The file's content now is compared
    /// with what the pages were last known to show (`Item.pagesShow`); when they differ the
    /// kernel is told, as of an outside change, and the open keeps no pages. Not while the
    /// daemon itself changes the file (`Item.ownChangesUnderWay`: its writes move the
    /// content without a record per write), nor without a complete watcher (no pages are
    /// kept then). Returns the state read, for the handle's record.
    private func pagesPredateContent(_ item: Item) -> (stat?, Bool) {
        guard ownChanges.enabled.load(ordering: .relaxed), let st = try? Syscall.fstat(item.fd) else { return (nil, false) }
        if item.ownChangesUnderWay.load(ordering: .acquiring) > 0 {
            guard ownChanges.checksOwnState else { return (st, false) }
            // Beside the daemon's own writer: the file must be in the state its last change
            // left, or someone else changed it meanwhile (its pages are in doubt). Pages in
            // doubt are dropped; from then on they show what the writer's changes leave.
            if ownChanges.continuesOwnState(item.inode, st) {
                let (cleared, _) = item.pagesShow.compareExchange(expected: ContentStamp.doubtful, desired: ContentStamp.unknown,
                                                                  ordering: .relaxed)
                guard cleared else { return (st, false) }
            } else {
                item.pagesShow.store(ContentStamp.doubtful, ordering: .relaxed)
            }
            kernelToldOfChange(item)
            return (st, true)
        }
        let now = ContentStamp.of(st)
        let shown = item.pagesShow.load(ordering: .relaxed)
        guard shown != now else { return (st, false) }
        // A change of the daemon's that began after the look above moved the content by
        // its own hand; another open that swapped first tells the kernel itself (and this
        // one waits for that news with it, `FUSEBridge.open`).
        guard item.ownChangesUnderWay.load(ordering: .acquiring) == 0,
              item.pagesShow.compareExchange(expected: shown, desired: now, ordering: .relaxed).exchanged,
              shown != ContentStamp.unknown else { return (st, false) }
        kernelToldOfChange(item)
        return (st, true)
    }

    /// Tells the kernel, as of an outside change, that its pages and attributes of `item`
    /// are old.
    private func kernelToldOfChange(_ item: Item) {
        outsideItemChanges.note(item.inode)
        forgetCachedAttributes(item)
        // Under writeback the kernel keeps the size it has for as long as it holds the
        // inode: every handle is uncached until a look-up makes a new one (decision 22).
        if kernelCachesWrites { markChangedOutside(item) }
        notify { $0.itemChanged(item.inode) }
        if kernelCachesWrites { letGoOfOldInode(item.inode, knownAs: item.placement) }
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

    /// Under `-o writeback`: whether the kernel's inode of this regular file may predate an
    /// edit made in the store: the item was changed outside the mount since the kernel
    /// last made an inode for it (a look-up of an item the daemon did not hold). The kernel
    /// keeps size and times of its inode itself there (DESIGN.md 22), so a handle opened on
    /// it is uncached (the daemon's reads end at the store's end of file, its appends land
    /// there).
    public func kernelMayHoldOldState(_ item: Item) -> Bool {
        kernelCachesWrites && item.changedOutsideEpoch.load(ordering: .acquiring) > item.lookedUpEpoch.load(ordering: .relaxed)
    }

    /// Under writeback: `item`'s content or times changed outside the mount, which the
    /// kernel's inode of it will not show (`kernelMayHoldOldState`). Marked before the
    /// epoch moves, so whoever sees the new epoch sees the mark. The watcher marks, and so
    /// does an open that found the content moved (`pagesPredateContent`): the epoch only
    /// ever grows, and two marks at once may share one.
    func markChangedOutside(_ item: Item) {
        let epoch = items.outsideEntryEpoch.load(ordering: .relaxed) &+ 1
        item.changedOutsideEpoch.store(epoch, ordering: .relaxed)
        items.outsideEntryEpoch.max(epoch, ordering: .releasing)
    }

    /// Under writeback the kernel would keep the old size and times of a file for as long
    /// as it holds its inode: the entry goes, so that a next look-up makes a new inode once
    /// nobody uses the old one (`entryLeadsToOldState`: never waited for).
    func dropOldInode(parent: UInt64, name: FilePath.Component) {
        notify { $0.entryLeadsToOldState(parent: parent, name: name) }
    }

    /// `dropOldInode` of the name the file is known as, and every other unused entry of its
    /// inode, where the kernel can prune (FUSE_NOTIFY_PRUNE): a hard link's other names,
    /// names the store gave the file, which the daemon does not know the kernel holds.
    func letGoOfOldInode(_ inode: UInt64, knownAs entry: (parent: UInt64, name: FilePath.Component)?) {
        if let (parent, name) = entry { dropOldInode(parent: parent, name: name) }
        notify { $0.letGoOfOldState(inode) }
    }

    /// The kernel released a handle of `item`. Under writeback, if the item changed in the
    /// store and the kernel may still hold its inode as it was: the entry the watcher
    /// dropped may be back, since a look-up made while the handle was open (a `stat`) found
    /// that very inode again; with the last handle gone, the entry goes again, so that the
    /// inode can go and the next look-up makes a new one (DESIGN.md 22).
    public func handleReleased(_ item: Item) {
        guard kernelMayHoldOldState(item), item.openHandles.load(ordering: .relaxed) == 0 else { return }
        let others = item.state.withLock { s in
            defer { s.namesGivenWhileStale = [] }
            return s.namesGivenWhileStale
        }
        if let (parent, name) = item.placement { notify { $0.entryLeadsToOldState(parent: parent, name: name) } }
        for (parent, name) in others { notify { $0.entryLeadsToOldState(parent: parent, name: name) } }
    }

    /// Creates and opens a new file (`open(O_CREAT)` of a missing name); O_EXCL is the
    /// kernel's business, which asks only when the name does not exist.
    public func create(_ parent: Item, _ name: UnsafePointer<CChar>, mode: mode_t, flags: CInt, caller: Caller) throws(Errno) -> (Item, stat, OpenFile) {
        if strlen(name) > 255 { throw .fileNameTooLong }
        try zone(of: parent).checkCreate(name)
        let (mark, birthMark) = ownChanges.creationMarks()
        let fd: CInt
        do {
            // Always exclusive: the kernel asks to create only a name it believes missing, so
            // an existing item here means its cache was stale (a change in the store it has
            // not been told of yet). Opening that item as the daemon would skip the caller's
            // permission check and could open a FIFO (DESIGN.md, decision 21).
            fd = try ownChanges.expectingEntry(parent.inode, name) { () throws(Errno) in
                try sheddingOnShortage { () throws(Errno) in
                    try Credentials.asCaller(caller) { () throws(Errno) in
                        try Syscall.openat(parent.fd, name, backingFlags(flags & ~(O_DIRECT | O_NOCTTY)) | O_CREAT | O_EXCL | O_NOFOLLOW, mode)
                    }
                }
            }
        } catch .fileExists where flags & O_EXCL == 0 {
            announceEntryChange(parent: parent.inode, name: FilePath.Component(platformString: name)!)
            return try openExisting(parent, name, flags: flags, caller: caller)
        }
        do {
            let (item, st) = try lookup(parent, name)
            // The inode made, not the one the name leads to now (replaced in the store
            // meanwhile, it may be an older item with names of its own).
            if birthMark != nil, let made = try? Syscall.fstat(fd) { ownChanges.made(UInt64(made.st_ino), after: birthMark) }
            // Recorded in the state it was made in, marked as of before the creation: see `open`.
            let file = OpenFile(fd: fd, item: item, direct: flags & O_DIRECT != 0, writable: true,
                                accessMode: flags & O_ACCMODE, ownChanges: ownChanges, state: st, mark: mark)
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
        guard item.isRegularFile else {
            items.forget(item.inode, count: 1)
            throw .fileExists
        }
        let accessFlags = (flags & ~(O_CREAT | O_EXCL | O_DIRECT | O_NOCTTY)) | O_NONBLOCK
        let mark = flags & O_TRUNC != 0 ? ownChanges.queuePosition() : .max
        item.writableOpensStarting.add(1, ordering: .sequentiallyConsistent)  // see `keepSnapshotsFrozen`
        defer { item.writableOpensStarting.subtract(1, ordering: .releasing) }
        do {
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
                defer {
                    ownChanges.closingUnwritten(item.inode, descriptor: checked, after: mark)  // its echo is own
                    Syscall.close(checked)
                }
                fd = try Syscall.reopen(item.fd, backingFlags(accessFlags & ~O_TRUNC))
            }
            // The answer tells the kernel the file as the open left it: a new inode takes its
            // size from it (under writeback for good), and the look-up's was from before O_TRUNC.
            let opened = flags & O_TRUNC != 0 ? (try? Syscall.fstat(fd)) ?? st : st
            return (item, opened, OpenFile(fd: fd, item: item, direct: flags & O_DIRECT != 0, writable: (flags & O_ACCMODE) != O_RDONLY,
                                       accessMode: flags & O_ACCMODE, ownChanges: ownChanges, mark: mark))
        } catch {
            items.forget(item.inode, count: 1)
            throw error
        }
    }
}
