import Glibc
import Synchronization
import SystemPackage

/// Where a volume keeps its live items: the client it hands them to keeps them (the FUSE
/// bridge's node table, which holds them for the kernel). The volume finds an item of an
/// inode through it, so that there is one per inode, and enters each one it makes.
///
/// Each item the volume hands out (`Volume.lookup` and the calls that make an item) comes
/// with one hold taken for the client; the client gives it back when it is done with the
/// item (the kernel's FORGET), and the keeper lets go of the item when no hold is left.
public protocol ItemKeeper: AnyObject, Sendable {
    /// The item kept for `inode`.
    func item(_ inode: UInt64) -> Item?
    /// One more hold of the item of `inode`: the one kept, or else the one `make` makes
    /// (run outside any lock; if another entered an item meanwhile, that one is held and
    /// the made one dropped). `epoch`: `ItemTable.outsideEntryEpoch` as read before the
    /// item was found. `isNew`: the item was not kept before.
    func hold(_ inode: UInt64, epoch: UInt64, make: () throws(Errno) -> Item) throws(Errno) -> (item: Item, isNew: Bool)
    /// Gives back `count` holds of the item of `inode`. At none the keeper lets go of it,
    /// and calls `Item.wasLetGo()` while no other item of the inode can be entered.
    func release(_ inode: UInt64, count: UInt64)
    /// Every inode kept.
    func allInodes() -> [UInt64]
}

/// The volume's live items and what it counts about them: kept by its `ItemKeeper`, one
/// `Item` per backing inode while the client holds it.
///
/// Lock order: a keeper's lock is taken alone, or before an `Item.state` lock, never the
/// other way round.
public final class ItemTable: Sendable {
    let keeper: any ItemKeeper

    /// Bumped whenever a directory moves across zones (out of Inbox, into or out of the
    /// trash), which makes every cached zone below it stale. Items compare their stamp and
    /// recompute lazily; such moves are rare, so the common path is one atomic load.
    let zoneEpoch = Atomic<UInt64>(0)
    /// Bumped by the store watcher for every entry removed or renamed in the store outside
    /// the mount: a name the kernel resolved before may now lead elsewhere
    /// (`Volume.wasReplacedInStore`); under `-o writeback` also for every regular file
    /// changed in place outside the mount (`Item.changedOutsideEpoch`).
    let outsideEntryEpoch = Atomic<UInt64>(0)
    /// How many of the items held were seen with more than one name (hard links,
    /// `Item.countedAsLinked`): an unlink or rename through the mount looks at the name it
    /// takes away only while there is one (`Volume.unlink`, `Volume.rename`).
    private let linkedItems = Atomic<Int>(0)
    /// Told of each regular file the kernel is first told has several names, or of every
    /// one with `everyFileWatched`.
    let fileWatcher = Mutex<(any FileWatching)?>(nil)
    let everyFileWatched = Atomic<Bool>(false)

    init(keeper: any ItemKeeper) {
        self.keeper = keeper
    }

    /// The live item with this number.
    @inline(__always)
    public func item(_ inode: UInt64) -> Item? { keeper.item(inode) }

    /// Holds the live item for `inode` for the client (`ItemKeeper.hold`); or, when there
    /// is none, makes one with `make` (which opens its descriptor) and enters it.
    /// `epoch`: `outsideEntryEpoch` as read before the name was resolved.
    /// `known`: run on an item already alive, before its look-up counts as a resolution of
    /// it (`resolvedEpoch`).
    func remember(_ inode: UInt64, epoch: UInt64, known: (Item) -> Void, make: () throws(Errno) -> Item) throws(Errno) -> Item {
        let (item, isNew) = try keeper.hold(inode, epoch: epoch, make: make)
        if !isNew { known(item) }
        item.resolvedEpoch.store(epoch, ordering: .relaxed)
        return item
    }

    /// Gives back the hold of an item the client was not handed after all.
    func abandon(_ item: Item) { keeper.release(item.inode, count: 1) }

    /// The keeper let go of `item`: it no longer counts as a file with several names, and
    /// its mark (`fileWatcher`) goes, before a newer item of the inode can be made and
    /// marked.
    func departing(_ item: Item) {
        if item.fileWatched.load(ordering: .relaxed), let watcher = fileWatcher.withLock({ $0 }) { watcher.unwatchFile(item) }
        if item.countedAsLinked.exchange(false, ordering: .relaxed) { linkedItems.subtract(1, ordering: .relaxed) }
    }

    /// Notes what the kernel is about to be told of `item`: a non-directory with more than
    /// one name counts towards `holdsLinkedFiles` until the item goes, and a regular
    /// file the store watcher asks for (`fileWatcher`) is handed to it once.
    @inline(__always)
    func noteLinks(_ item: Item, _ st: stat) {
        if st.st_mode & S_IFMT == S_IFREG, st.st_nlink > 1 || everyFileWatched.load(ordering: .relaxed),
           !item.fileWatched.load(ordering: .relaxed), let watcher = fileWatcher.withLock({ $0 }),
           item.fileWatched.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged {
            watcher.watchFile(item)
        }
        guard st.st_nlink > 1, st.st_mode & S_IFMT != S_IFDIR else { return }
        if !item.countedAsLinked.load(ordering: .relaxed),
           item.countedAsLinked.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged {
            linkedItems.add(1, ordering: .relaxed)
        }
    }

    /// Whether a live item is a file seen with several names.
    var holdsLinkedFiles: Bool { linkedItems.load(ordering: .relaxed) > 0 }

    /// Every inode with a live item (the watcher lost events: every item may have changed).
    public func allInodes() -> [UInt64] { keeper.allInodes() }
}

extension ItemTable: SnapshotWriters {
    /// Whether the mount has the file open for writing, or is opening, truncating or
    /// otherwise changing it (`Volume.keepSnapshotsFrozen`).
    public func isWriting(_ inode: UInt64) -> Bool {
        guard let item = item(inode) else { return false }
        return item.writableOpensStarting.load(ordering: .sequentiallyConsistent) > 0
            || item.changesUnderWay.load(ordering: .sequentiallyConsistent) > 0
    }
}

/// A store watcher that marks directories hears of a file's link count changing only
/// through a mark of the file itself (a rename over one of its names tells the directory
/// of the name, not of the file it displaced): it marks the regular files the kernel holds
/// with several names, and under `-o writeback` every one (the kernel keeps a file's size
/// itself there, and must be made to let go of a file the store displaced).
protocol FileWatching: AnyObject, Sendable {
    func watchFile(_ item: Item)
    /// The item is going; its descriptor is still open.
    func unwatchFile(_ item: Item)
}
