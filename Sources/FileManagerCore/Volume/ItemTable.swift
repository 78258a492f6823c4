import Glibc
import Synchronization
import SystemPackage

/// All items the client (the kernel) holds references to, keyed by inode number.
///
/// Sharded so that concurrent lookups of unrelated files do not contend on one lock
/// (passthrough_ll's single-mutex list is its top hotspot). Lock order: a shard lock is
/// taken alone, or before an `Item.state` lock, never the other way round.
public final class ItemTable: Sendable {
    static let shardCount = 64
    /// A class only because an array cannot hold the non-copyable `Mutex` itself.
    private final class Shard: Sendable {
        let items = Mutex<[UInt64: Item]>([:])
        func withLock<R: Sendable>(_ body: (inout sending [UInt64: Item]) -> sending R) -> R { items.withLock(body) }
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
    private func shard(_ inode: UInt64) -> Int { Int(truncatingIfNeeded: (inode &* 0x9E37_79B9_7F4A_7C15) >> 58) }

    /// The item with this number, if the client holds it.
    @inline(__always)
    public func item(_ inode: UInt64) -> Item? {
        shards[shard(inode)].withLock { $0[inode] }
    }

    /// Returns the known item for `inode`, adding one reference; or, when unknown, makes
    /// one with `make` (which opens its descriptor) and inserts it with one reference.
    /// `make` runs outside the lock; if another thread inserted meanwhile, its item wins.
    /// `epoch`: `outsideEntryEpoch` as read before the name was resolved.
    /// `known`: run on an item already held, before its look-up counts as a resolution of it
    /// (`resolvedEpoch`).
    func remember(_ inode: UInt64, epoch: UInt64, known: (Item) -> Void = { _ in }, make: () throws(Errno) -> Item) throws(Errno) -> Item {
        let s = shard(inode)
        if let existing = shards[s].withLock({ table -> Item? in
            guard let item = table[inode] else { return nil }
            item.state.withLock { $0.references += 1 }
            return item
        }) {
            known(existing)
            existing.resolvedEpoch.store(epoch, ordering: .relaxed)
            return existing
        }
        let fresh = try make()
        let item = shards[s].withLock { table in
            let item = table[inode] ?? fresh
            table[inode] = item
            item.state.withLock { $0.references += 1 }
            return item
        }
        // Another look-up made it meanwhile (of another name, for a file with several).
        if item !== fresh { known(item) }
        item.resolvedEpoch.store(epoch, ordering: .relaxed)
        // Only an item the daemon did not hold is a new inode in the kernel: a look-up of
        // one it holds may keep the kernel's old inode, and with it an old size.
        if item === fresh { item.lookedUpEpoch.store(epoch, ordering: .relaxed) }
        return item
    }

    /// Adds references to an item the client already holds (e.g. root).
    func insertPermanent(_ item: Item) {
        shards[shard(item.inode)].withLock { table in
            table[item.inode] = item
            item.state.withLock { $0.references = UInt64.max / 2 }
        }
    }

    /// Drops `count` references; at zero the item leaves the table and its descriptor is
    /// closed once the last in-flight request using it finishes.
    public func forget(_ inode: UInt64, count: UInt64) {
        let gone = shards[shard(inode)].withLock { table -> (item: Item, parent: Item?)? in
            guard let item = table[inode] else { return nil }
            let (left, parent) = item.state.withLock { st -> (UInt64, Item?) in
                st.references = st.references >= count ? st.references - count : 0
                return (st.references, st.parent)
            }
            guard left == 0 else { return nil }
            table[inode] = nil
            return (item, parent)
        }
        // A listing the parent's kernel cache holds names the item no more once it was
        // removed (the journal SQLite deletes at every commit): its forgetting gives
        // READDIRPLUS nothing to prime, and must not start the listing afresh (DESIGN.md 34).
        guard let gone else { return }
        if gone.item.countedAsLinked.exchange(false, ordering: .relaxed) { linkedItems.subtract(1, ordering: .relaxed) }
        guard let parent = gone.parent else { return }
        if !gone.item.isVirtual, let st = try? Syscall.fstat(gone.item.fd), st.st_nlink == 0 { return }
        parent.childrenForgotten.add(1, ordering: .relaxed)
    }

    /// Notes what the kernel is about to be told of `item`: a non-directory with more than
    /// one name counts towards `holdsLinkedFiles` until the kernel forgets it, and a regular
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

    /// Whether the kernel holds a file it was told has several names.
    var holdsLinkedFiles: Bool { linkedItems.load(ordering: .relaxed) > 0 }

    /// Every inode held (the watcher lost events: every item may have changed).
    public func allInodes() -> [UInt64] {
        shards.flatMap { s in s.withLock { Array($0.keys) } }
    }

    /// Forgets everything (unmount).
    public func removeAll() {
        for s in shards { s.withLock { $0.removeAll() } }
    }

    /// How many items are held: for tests and statistics.
    public var count: Int { shards.reduce(0) { n, s in n + s.withLock { $0.count } } }
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
}
