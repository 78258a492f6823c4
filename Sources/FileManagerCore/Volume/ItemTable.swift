import Glibc
import Synchronization
import SystemPackage

/// The live items, keyed by inode number: one `Item` per backing inode, for as long as
/// something holds it. The table holds none: the FUSE bridge holds the items the kernel
/// has references to (its node table), open handles hold theirs, and a request holds its
/// own while it runs. An item leaves the table as it goes (`Item.deinit`), so a look-up
/// of an inode finds the item still alive rather than making a second one.
///
/// Sharded so that concurrent lookups of unrelated files do not contend on one lock
/// (passthrough_ll's single-mutex list is its top hotspot). Lock order: a shard lock is
/// taken alone, or before an `Item.state` lock, never the other way round.
public final class ItemTable: Sendable {
    /// How many shards, and which one an inode's is (a Fibonacci hash of the number): the
    /// bridge's node table is sharded the same way.
    public static let shardCount = 64
    @inlinable @inline(__always)
    public static func shardIndex(_ inode: UInt64) -> Int { Int(truncatingIfNeeded: (inode &* 0x9E37_79B9_7F4A_7C15) >> 58) }
    /// A weak reference: the table must not keep an item (and its descriptor) alive.
    /// Read only through `alive(_:)`: Swift 6.3 miscompiles `table[key]?.item` on a weak
    /// field of an optional struct (it loads the weak reference of a missing entry).
    private struct Entry: @unchecked Sendable {
        weak var item: Item?
        let identity: ObjectIdentifier
    }

    @inline(__always)
    private static func alive(_ entry: Entry?) -> Item? {
        guard let entry else { return nil }
        return entry.item
    }
    /// A class only because an array cannot hold the non-copyable `Mutex` itself.
    private final class Shard: Sendable {
        let items = Mutex<[UInt64: Entry]>([:])
        func withLock<R: Sendable>(_ body: (inout sending [UInt64: Entry]) -> sending R) -> R { items.withLock(body) }
    }
    private let shards: [Shard]

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

    init() {
        shards = (0..<Self.shardCount).map { _ in Shard() }
    }

    @inline(__always)
    private func shard(_ inode: UInt64) -> Int { Self.shardIndex(inode) }

    /// The live item with this number.
    @inline(__always)
    public func item(_ inode: UInt64) -> Item? {
        shards[shard(inode)].withLock { ItemTable.alive($0[inode]) }
    }

    /// Returns the live item for `inode`; or, when there is none, makes one with `make`
    /// (which opens its descriptor) and enters it. `make` runs outside the lock; if another
    /// thread entered one meanwhile, its item wins.
    /// `epoch`: `outsideEntryEpoch` as read before the name was resolved.
    /// `known`: run on an item already alive, before its look-up counts as a resolution of
    /// it (`resolvedEpoch`).
    func remember(_ inode: UInt64, epoch: UInt64, known: (Item) -> Void = { _ in }, make: () throws(Errno) -> Item) throws(Errno) -> Item {
        let s = shard(inode)
        if let existing = item(inode) {
            known(existing)
            existing.resolvedEpoch.store(epoch, ordering: .relaxed)
            return existing
        }
        let fresh = try make()
        let item = shards[s].withLock { table -> Item in
            if let alive = ItemTable.alive(table[inode]) { return alive }
            table[inode] = Entry(item: fresh, identity: ObjectIdentifier(fresh))
            return fresh
        }
        // Another look-up made it meanwhile (of another name, for a file with several).
        if item !== fresh { known(item) }
        item.resolvedEpoch.store(epoch, ordering: .relaxed)
        return item
    }

    /// Enters an item that lives as long as the table (the root).
    func insertPermanent(_ item: Item) {
        shards[shard(item.inode)].withLock { $0[item.inode] = Entry(item: item, identity: ObjectIdentifier(item)) }
    }

    /// `item` is going (its last reference is being dropped): it leaves the table unless a
    /// newer item of the inode took its place (made once this one could no longer be found).
    func departing(_ item: Item) {
        let identity = ObjectIdentifier(item)
        let watcher = item.fileWatched.load(ordering: .relaxed) ? fileWatcher.withLock({ $0 }) : nil
        shards[shard(item.inode)].withLock { table in
            guard let entry = table[item.inode], entry.identity == identity else { return }
            table[item.inode] = nil
            // Under the lock: a newer item of the inode is entered after, and marks the
            // inode after that, so this cannot take its mark away.
            watcher?.unwatchFile(item)
        }
        if item.countedAsLinked.load(ordering: .relaxed) { linkedItems.subtract(1, ordering: .relaxed) }
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
    /// The entries are copied out of the locks: whether an entry's item is alive is asked
    /// outside them, since the reference that asks may be the item's last, and an item that
    /// goes leaves its shard (`departing`).
    public func allInodes() -> [UInt64] {
        shards.flatMap { s in s.withLock { Array($0) } }.compactMap { ItemTable.alive($0.value) == nil ? nil : $0.key }
    }
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
