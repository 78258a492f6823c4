import Glibc
import Logging
import Synchronization
import SystemPackage

/// The mounted tree as POSIX sees it, built on the store: the primitives the FUSE bridge
/// calls one for one (lookup, create, rename with flags, single-item unlink, unfiltered
/// listing), with docs/SEMANTICS.md §1's per-area policy enforced before any system call.
///
/// Items are addressed by `Item` (one per backing inode, holding an `O_PATH` descriptor);
/// names are single path components as bytes. Nothing here knows about FUSE.
///
/// Errors are bare `Errno` values (typed throws): this layer answers the kernel, which
/// needs the number; `CoreFileManager` wraps them with paths for people.
public final class Volume: Sendable {
    public let store: Store
    public let items: ItemTable
    public let registry: ContainerRegistry
    /// The virtual mount root (inode 1).
    public let root: Item
    let logger: Logger

    /// The inode number reported for the virtual root; FUSE's root node id.
    public static let rootInode: UInt64 = 1

    private let changeObservers = Mutex<[any VolumeObserver]>([])
    /// Items the watcher lately found changed outside the mount (a look-up racing one).
    let outsideItemChanges = OutsideItemChanges()
    /// When descriptors last ran short and the kernel was asked to let go (Volume+Descriptors).
    let lastShedding = Atomic<UInt64>(0)
    /// Where in the table the next shedding starts (each round goes on from the last).
    let sheddingCursor = Atomic<Int>(0)
    /// When shedding was last logged (once a minute at most).
    let lastSheddingLog = Atomic<UInt64>(0)

    /// The kernel caches writes (FUSE writeback cache): it may read back pages of a file
    /// opened write-only, and it places appends itself.
    public let kernelCachesWrites: Bool

    /// `keeper`: where the live items are kept (the client's table of what it holds).
    public init(store: Store, keeper: any ItemKeeper, kernelCachesWrites: Bool = false,
                logger: Logger = Logger(label: "containerfs.volume")) {
        self.store = store
        self.items = ItemTable(keeper: keeper)
        self.kernelCachesWrites = kernelCachesWrites
        self.registry = ContainerRegistry(store: store)
        self.logger = logger
        root = Item(inode: Volume.rootInode, fd: -1, type: S_IFDIR, zone: .root, parent: nil, name: nil, epoch: 0, table: items)
        // Held once, for good: the client never gives the root back.
        _ = try? keeper.hold(Volume.rootInode, epoch: 0) { [root] () throws(Errno) in root }
        store.snapshotData.load()
        // A publish links no file the mount is writing (`keepSnapshotsFrozen`).
        store.snapshotData.writers.withLock { [items] in $0 = items }
    }

    /// Registers an observer of changes the volume makes (kernel invalidation, presenters).
    public func addObserver(_ observer: any VolumeObserver) {
        changeObservers.withLock { $0.append(observer) }
    }

    /// Announces that the entry `name` of the directory `parent` changed outside the kernel's
    /// view (the daemon ran a CLI command on the store, or found a name the kernel believed
    /// missing): its cached entry and listing go.
    public func announceEntryChange(parent: UInt64, name: FilePath.Component) {
        listingChanged(parent)
        notify { $0.entryChanged(parent: parent, name: name) }
    }

    /// The inode number of `containers/`.
    public var containersInode: UInt64 { (try? Syscall.fstat(store.containersFD)).map { UInt64($0.st_ino) } ?? 0 }

    func notify(_ body: (any VolumeObserver) -> Void) {
        for o in changeObservers.withLock({ $0 }) { body(o) }
    }

    /// Whether an observer can ask the kernel to drop only unused entries (`letGo`).
    var observersCanLetGo: Bool { changeObservers.withLock { $0 }.contains { $0.canLetGo } }

    /// Whether an observer has yet to act on something it was told about the item `inode`.
    public func observersHavePendingChanges(for inode: UInt64) -> Bool {
        changeObservers.withLock { $0 }.contains { $0.hasPendingChanges(for: inode) }
    }

    /// Runs `body` once every observer acted on what it was told so far about the item
    /// `inode` and returns true; false when none had anything pending (`body` was not run).
    public func afterObserversCaughtUp(with inode: UInt64, _ body: @escaping @Sendable () -> Void) -> Bool {
        Self.after(changeObservers.withLock { $0 }[...], inode, body)
    }

    private static func after(_ observers: ArraySlice<any VolumeObserver>, _ inode: UInt64,
                              _ body: @escaping @Sendable () -> Void) -> Bool {
        guard let first = observers.first else { return false }
        let rest = observers.dropFirst()
        if first.afterPendingChanges(for: inode, { if !after(rest, inode, body) { body() } }) { return true }
        return after(rest, inode, body)
    }

    /// The live item of `inode` (one the client holds).
    @inline(__always)
    public func item(_ inode: UInt64) -> Item? { items.item(inode) }

    // MARK: - Zones

    /// The item's current zone: cached, recomputed from its parent after a move across zones.
    public func zone(of item: Item) -> Zone {
        let epoch = items.zoneEpoch.load(ordering: .acquiring)
        let (cached, stamp, parent, name) = item.state.withLock { ($0.zone, $0.zoneEpoch, $0.parent, $0.name) }
        if stamp == epoch { return cached }
        guard let parent, let name else { return cached }
        let parentZone = zone(of: parent)
        let fresh = name.withPlatformString { parentZone.child(named: $0, isDirectory: item.isDirectory, key: item.inode) }
        item.state.withLock { $0.zone = fresh; $0.zoneEpoch = epoch }
        return fresh
    }

    // MARK: - Lookup

    /// Finds `name` in `parent` and returns its item (the live one if there is one) and its
    /// attributes, held once for the client (`ItemKeeper`). Never blocks on coordination
    /// (docs/SEMANTICS.md §3).
    public func lookup(_ parent: Item, _ name: UnsafePointer<CChar>) throws(Errno) -> (Item, stat) {
        if strlen(name) > 255 { throw .fileNameTooLong }
        if parent.isVirtual { return try lookupInRoot(name) }
        if name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0)) {
            throw .noSuchFileOrDirectory  // the kernel resolves . and ..; never hand out a parent
        }
        // Open first, then fstat the descriptor (passthrough_ll's order): the attributes
        // are those of the very item the descriptor holds, with no window for a swap, in
        // two system calls for a new item; a known one closes the extra descriptor.
        // The outside-change epoch is read before the name is resolved: a replacement the
        // watcher counts meanwhile leaves the item due for a check (`wasReplacedInStore`).
        let epoch = items.outsideEntryEpoch.load(ordering: .acquiring)
        let changes = outsideItemChanges.sequence.load(ordering: .acquiring)
        let open = { () throws(Errno) -> CInt in try Syscall.openat(parent.fd, name, O_PATH | O_NOFOLLOW) }
        let fd: CInt
        do {
            fd = try open()
        } catch {
            guard Volume.isDescriptorShortage(error) else { throw error }
            if let (item, st) = try heldItem(parent, name, epoch: epoch) {
                return (item, try handingOut(item) { () throws(Errno) in try current(st, of: item, since: changes) })
            }
            fd = try afterShedding(error, open)
        }
        let st: stat
        do { st = try Syscall.fstat(fd) } catch {
            Syscall.close(fd)
            throw error
        }
        guard UInt64(st.st_dev) == store.device else {  // a mount inside the store
            Syscall.close(fd)
            throw .permissionDenied
        }
        guard !isStray(st, in: parent) else {
            Syscall.close(fd)
            throw .noSuchFileOrDirectory
        }
        var used = false
        let item = try remember(st, in: parent, name: name, epoch: epoch) { () throws(Errno) in
            used = true
            return fd
        }
        if !used { Syscall.close(fd) }
        let now = try handingOut(item) { () throws(Errno) in try current(st, of: item, since: changes) }
        items.noteLinks(item, now)
        return (item, presentedFile(now, of: item))
    }

    /// Runs the rest of a call that hands out `item`, held for the client: if it fails, the
    /// client is not handed the item, and the hold is given back.
    func handingOut<R>(_ item: Item, _ body: () throws(Errno) -> R) throws(Errno) -> R {
        do { return try body() } catch {
            items.abandon(item)
            throw error
        }
    }

    /// `st`, read by a look-up of `item`, or the item's state now if the store watcher
    /// found the item changed outside the mount since the look-up began (`changes`): it may
    /// have found no item to tell the kernel of, and the kernel is about to learn the state
    /// the look-up read (`OutsideItemChanges`).
    func current(_ st: stat, of item: Item, since changes: UInt64) throws(Errno) -> stat {
        guard outsideItemChanges.changed(item.inode, since: changes) else { return st }
        return try Syscall.fstat(item.fd)
    }

    /// Out of descriptors, a name that leads to an item already held is still found: by
    /// `fstatat`, which needs none, and the table (the held descriptor pins the inode, so
    /// its number is unambiguous). Nil when the item is not held.
    private func heldItem(_ parent: Item, _ name: UnsafePointer<CChar>, epoch: UInt64) throws(Errno) -> (Item, stat)? {
        let st = try Syscall.fstatat(parent.fd, name)
        guard !isStray(st, in: parent) else { throw .noSuchFileOrDirectory }
        guard UInt64(st.st_dev) == store.device, items.item(UInt64(st.st_ino)) != nil else { return nil }
        let item = try remember(st, in: parent, name: name, epoch: epoch) { () throws(Errno) in throw .tooManyOpenFiles }
        return (item, st)
    }

    /// Whether `st`, found in `parent`, is a stray entry of `containers/`: only real
    /// directories are containers (DESIGN.md 21), so a link or file planted there in the
    /// store is neither found nor listed through the mount (the kernel would follow a link
    /// out of the store). Only non-directories pay for the zone.
    func isStray(_ st: stat, in parent: Item) -> Bool {
        (st.st_mode & S_IFMT) != S_IFDIR && zone(of: parent) == .containers
    }

    /// Opens `name` and checks it is the inode `st` describes; EAGAIN when it is not.
    static func openMatching(_ st: stat, _ dir: CInt, _ name: UnsafePointer<CChar>, _ flags: CInt) throws(Errno) -> CInt {
        let fd = try Syscall.openat(dir, name, flags)
        guard let now = try? Syscall.fstat(fd), now.st_ino == st.st_ino, now.st_dev == st.st_dev,
              (now.st_mode & S_IFMT) == (st.st_mode & S_IFMT) else {
            Syscall.close(fd)
            throw .resourceTemporarilyUnavailable
        }
        return fd
    }

    /// Holds the item for `st` for the client, making it (with `open`) if it is new.
    func remember(_ st: stat, in parent: Item, name: UnsafePointer<CChar>, epoch: UInt64? = nil,
                  open: () throws(Errno) -> CInt) throws(Errno) -> Item {
        let inode = UInt64(st.st_ino)
        let type = st.st_mode & S_IFMT
        // A file found under another name than it was last seen under is followed there
        // before the look-up counts as a resolution of it: an OPEN through the old name
        // meanwhile finds the old entry counted (`followMoveInStore`). Only once the watcher
        // counted an entry removed or moved in the store since the item was last resolved:
        // before, its name cannot have moved there (a rename through the mount moves it
        // itself), and the usual look-up pays one atomic load. A move the watcher has yet to
        // count is found by the OPEN, which catches up first (`wasReplacedInStore`).
        let epoch = epoch ?? items.outsideEntryEpoch.load(ordering: .acquiring)
        // A file with other names is known by one; the kernel's entries of the others are
        // checked by an open too (`noteOtherName`).
        let item = try items.remember(inode, epoch: epoch, known: { item in
            guard !item.isDirectory else { return }
            if item.resolvedEpoch.load(ordering: .relaxed) != epoch { followMoveInStore(item, to: parent, name: name) }
            if st.st_nlink > 1 { noteOtherName(item, parent, name) }
        }) { () throws(Errno) in
            let fd = try open()
            let parentZone = zone(of: parent)
            let zone = parentZone.child(named: name, isDirectory: type == S_IFDIR, key: inode)
            return Item(inode: inode, fd: fd, type: type, zone: zone, parent: parent,
                        name: FilePath.Component(platformString: name), epoch: items.zoneEpoch.load(ordering: .acquiring),
                        table: items)
        }
        // Directories have one parent; follow it if the item moved behind our back.
        if item.isDirectory {
            let moved = item.state.withLock { $0.parent !== parent }
            if moved { relocate(item, to: parent, name: name) }
        }
        return item
    }

    /// A look-up found a file under another name than the one it was last seen under. If
    /// that name still leads to it, the new one is another link, and the item stays put (a
    /// hard link's other names are not followed). If not, the file was moved or removed
    /// there in the store: the item follows it to the name found (the checks of
    /// `wasReplacedInStore` look at that name from now on, and its zone is the new
    /// parent's), and the kernel's entry of the old name, which still leads to the item
    /// until the watcher's invalidation of it reaches the kernel, is invalidated once more
    /// (`nameLeftBehind`). An OPEN meanwhile may have come through the old name, and is
    /// answered ESTALE by the client: the kernel looks the path up again, and finds the old
    /// name gone, or opens the file under the new one, rather than serve an open through the
    /// old name right after a look-up of the new one.
    private func followMoveInStore(_ item: Item, to parent: Item, name: UnsafePointer<CChar>) {
        let (oldParent, oldName) = item.state.withLock { ($0.parent, $0.name) }
        guard let oldParent, let oldName, !oldParent.isVirtual else { return }
        if oldParent === parent && oldName.withPlatformString({ strcmp($0, name) == 0 }) { return }
        if leadsTo(item, oldParent, oldName) { return }  // another link, or unknown: leave it
        nameLeftBehind(item, parent: oldParent.inode, name: oldName)  // before the name moves: see remember
        relocate(item, to: parent, name: name)
    }

    /// The kernel's entry `name` in `parent` still leads to `item`, though the store moved
    /// the name away: the client drops it, and until the kernel dropped it, may be reached
    /// through it (an OPEN it sent through the entry may still be on its way). Told before
    /// the item follows the move, so that an open sees either the old name or this.
    func nameLeftBehind(_ item: Item, parent: UInt64, name: FilePath.Component) {
        notify { $0.nameLeftBehind(item.inode, parent: parent, name: name) }
    }

    /// Records that `item` now lives in `parent` as `name`; a directory that changed zones
    /// makes every cached zone below it stale (bump of the epoch).
    func relocate(_ item: Item, to parent: Item, name: UnsafePointer<CChar>) {
        let newZone = zone(of: parent).child(named: name, isDirectory: item.isDirectory, key: item.inode)
        let component = FilePath.Component(platformString: name)
        let (oldZone, oldParent) = item.state.withLock { st -> (Zone, Item?) in
            let old = (st.zone, st.parent)
            st.parent = parent
            st.name = component
            st.zone = newZone
            return old
        }
        // A directory moved elsewhere lists another `..`: the kernel bumps the version of
        // both parents, not of the directory itself.
        if item.isDirectory && oldParent !== parent { listingChanged(item.inode) }
        if item.isDirectory && oldZone != newZone {
            let epoch = items.zoneEpoch.add(1, ordering: .acquiringAndReleasing).newValue
            item.state.withLock { $0.zoneEpoch = epoch }
        }
    }

    private func lookupInRoot(_ name: UnsafePointer<CChar>) throws(Errno) -> (Item, stat) {
        let (dir, storeName): (CInt, UnsafePointer<CChar>)
        if strcmp(name, "containers") == 0 || strcmp(name, "snapshots") == 0 {
            (dir, storeName) = (store.rootFD, name)
        } else if Volume.trashOwner(name) != nil {
            (dir, storeName) = (store.trashFD, name)
        } else {
            throw .noSuchFileOrDirectory
        }
        let st = try Syscall.fstatat(dir, storeName)
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw .noSuchFileOrDirectory }
        do {
            let item = try remember(st, in: root, name: name) { () throws(Errno) in
                try Volume.openMatching(st, dir, storeName, O_PATH | O_DIRECTORY | O_NOFOLLOW)
            }
            return (item, presented(st, of: item))
        } catch .resourceTemporarilyUnavailable {
            throw .ioError
        }
    }

    /// The uid in a `.Trash-UID` name, if `name` is one.
    static func trashOwner(_ name: UnsafePointer<CChar>) -> uid_t? {
        guard strncmp(name, ".Trash-", 7) == 0 else { return nil }
        var value: UInt64 = 0
        var p = name + 7
        // One spelling per uid, as `.Trash-$uid` prints it: no sign, no leading zero.
        guard p.pointee != 0, p.pointee != 48 || p[1] == 0 else { return nil }
        while p.pointee != 0 {
            let c = UInt8(bitPattern: p.pointee)
            guard c >= 48, c <= 57, value < UInt64(UInt32.max) else { return nil }
            value = value * 10 + UInt64(c - 48)
            p += 1
        }
        return value < UInt64(UInt32.max) ? uid_t(value) : nil  // (uid_t)-1 is no user
    }

    // MARK: - Attributes

    /// `lstat` of the item. The virtual root is a sticky, world-writable directory (like
    /// /tmp) so that any user may `mkdir containers/ID` and `.Trash-UID`; the daemon's
    /// policy, not its mode, decides what else happens there.
    public func attributes(_ item: Item) throws(Errno) -> stat {
        if item.isVirtual { return rootAttributes() }
        let st = presented(try Syscall.fstat(item.fd), of: item)
        items.noteLinks(item, st)
        return st
    }

    /// The attributes the mount shows for `st` of `item`: the store's, except that
    /// `containers/` is sticky and world-writable (DESIGN.md, decision 5), and that a live
    /// file's links held by snapshots (`SnapshotData`) are not counted. Every answer about
    /// an item (GETATTR, LOOKUP, READDIRPLUS, SETATTR) goes through here, so that `stat`
    /// shows one mode and link count whichever the kernel asked last.
    func presented(_ st: stat, of item: Item) -> stat {
        guard item.isDirectory else { return presentedFile(st, of: item) }
        guard case .containers = zone(of: item) else { return st }
        var shown = st
        shown.st_mode = S_IFDIR | 0o1777
        return shown
    }

    /// `st` of a file as the mount shows it, where snapshots share data (`SnapshotData`): a
    /// live file's links held by snapshots left out (only a file with several links looks),
    /// and a snapshot's sparse placeholder given the blocks of its data (only a file with
    /// none looks).
    func presentedFile(_ st: stat, of item: Item) -> stat {
        guard item.isRegularFile else { return st }
        var shown = st
        if st.st_nlink > 1 {
            let held = store.snapshotData.links(of: item.inode)
            if held > 0 { shown.st_nlink = nlink_t(max(Int(st.st_nlink) - held, 1)) }
        } else if st.st_blocks == 0, st.st_size > 0, store.snapshotData.holdsData, case .snapshots = zone(of: item),
                  let snapshot = snapshotName(of: item), let blocks = store.snapshotData.blocks(snapshot: snapshot, entry: item.inode) {
            shown.st_blocks = blocks
        }
        return shown
    }

    func rootAttributes() -> stat {
        var st = stat()
        st.st_ino = ino_t(Volume.rootInode)
        st.st_mode = S_IFDIR | 0o1777
        st.st_nlink = 4
        st.st_uid = 0
        st.st_gid = 0
        st.st_blksize = 4096
        if let storeStat = try? Syscall.fstat(store.rootFD) {
            st.st_atim = storeStat.st_atim
            st.st_mtim = storeStat.st_mtim
            st.st_ctim = storeStat.st_ctim
        }
        return st
    }

    /// The backing store's file system figures, for every path (no quotas).
    public func fileSystemAttributes() throws(Errno) -> statvfs {
        try Syscall.fstatvfs(store.rootFD)
    }

    /// The target of a symbolic link, as bytes.
    public func readlink(_ item: Item) throws(Errno) -> [UInt8] {
        guard item.isSymlink else { throw .invalidArgument }
        return try Syscall.readlink(pathDescriptor: item.fd)
    }
}

/// Told about changes the volume itself made, after they happened: the FUSE bridge
/// invalidates the kernel's caches for changes that did not come through the kernel
/// (CLI commands run by the daemon), later presenters hear of them.
public protocol VolumeObserver: Sendable {
    /// An entry appeared, disappeared or was replaced in the directory `parent`.
    func entryChanged(parent: UInt64, name: FilePath.Component)
    /// An entry may have appeared in the directory `parent` without the kernel seeing it:
    /// what it cached of the name must be looked up again, but an entry in use (a working
    /// directory) must not be dropped.
    func entryMayHaveAppeared(parent: UInt64, name: FilePath.Component)
    /// An item's data or attributes changed.
    func itemChanged(_ inode: UInt64)
    /// The entries of the directory `directory` changed without the kernel seeing it: a
    /// listing it cached is no longer the directory's (told before the entries' own news).
    func listingChanged(_ directory: UInt64)
    /// Changes may have been missed (the watcher's queue overflowed): every listing may
    /// have changed, and every item the observer is told of next.
    func resync()
    /// The same for changes found in the store by its watcher. Called only on the watcher's
    /// own thread, never from a request handler and under no lock: an observer may act at
    /// once, if acting cannot block (the kernel notifier's calls can, DESIGN.md 35: it
    /// queues them like the others, and the watcher goes on).
    func entryChangedOutside(parent: UInt64, name: FilePath.Component)
    func itemChangedOutside(_ inode: UInt64)
    /// Whether something the observer was told about the item `inode` (its data or
    /// attributes) has yet to take effect (a queued kernel notification).
    func hasPendingChanges(for inode: UInt64) -> Bool
    /// Runs `body` once what it was told so far about the item `inode` took effect and
    /// returns true; false when nothing is pending (`body` is not run). Never runs `body`
    /// before returning.
    func afterPendingChanges(for inode: UInt64, _ body: @escaping @Sendable () -> Void) -> Bool
    /// The kernel's entry `name` in `parent` leads to the item `inode`, which moved elsewhere
    /// in the store (or the name was replaced there): the entry goes, and an OPEN of the
    /// item may have come through it until it went.
    func nameLeftBehind(_ inode: UInt64, parent: UInt64, name: FilePath.Component)
    /// Whether `letGo` works: the kernel can be asked to drop what it caches of an item only
    /// where unused (FUSE_NOTIFY_PRUNE), which spares a working directory or an open file.
    var canLetGo: Bool { get }
    /// Asks the kernel to drop the unused entries of these items, and so forget the items.
    func letGo(_ inodes: [UInt64])
}

extension VolumeObserver {
    public func resync() {}
    public func listingChanged(_ directory: UInt64) {}
    public func entryChangedOutside(parent: UInt64, name: FilePath.Component) { entryChanged(parent: parent, name: name) }
    public func itemChangedOutside(_ inode: UInt64) { itemChanged(inode) }
    public func hasPendingChanges(for inode: UInt64) -> Bool { false }
    public func afterPendingChanges(for inode: UInt64, _ body: @escaping @Sendable () -> Void) -> Bool { false }
    public func entryMayHaveAppeared(parent: UInt64, name: FilePath.Component) { entryChanged(parent: parent, name: name) }
    public var canLetGo: Bool { false }
    public func letGo(_ inodes: [UInt64]) {}
    public func nameLeftBehind(_ inode: UInt64, parent: UInt64, name: FilePath.Component) {
        entryChanged(parent: parent, name: name)
    }
}
