import FileManagerCore
import Glibc
import Synchronization
import SystemPackage

/// The nodes the kernel holds: for each node id (the item's inode number, DESIGN.md 60),
/// the core's item and the kernel's lookup count (FUSE's `nlookup`: one per LOOKUP,
/// CREATE, MKDIR, MKNOD, SYMLINK, LINK or READDIRPLUS entry answered, given back by
/// FORGET). It is the volume's `ItemKeeper`: the one table of live items. The volume's
/// hold of an item it hands out is the kernel's reference to come, counted before the
/// answer leaves (the kernel may send FORGET the moment it has it); a request that does
/// not answer it gives the hold back. At zero the node goes, and with it the table's hold
/// on the item (and its `O_PATH` descriptor) once no request or handle uses it.
///
/// What only the kernel's view of an item needs is kept in its node too: the epoch its
/// inode was made at inline, the rest (`Node`) made when first needed, since most files
/// never need it. As an observer of the volume, the table hears which directories'
/// listings changed unseen.
///
/// Sharded, so that requests of unrelated nodes do not contend on one lock
/// (passthrough_ll's single-mutex list is its top hotspot).
public final class NodeTable: ItemKeeper, VolumeObserver, Sendable {
    /// What the kernel holds of one item beyond its reference, made on first need.
    final class Node: Sendable {
        /// Under writeback, names other than the item's own that look-ups resolved to this
        /// file while the kernel's inode of it predated an edit in the store and a handle
        /// kept that inode: each such entry keeps the old inode too, and goes with the last
        /// handle (`FUSEBridge.handleReleased`). At most 8.
        let namesGivenWhileStale = Mutex<[(parent: UInt64, name: FilePath.Component)]>([])
        /// Names the item was moved or removed from in the store whose entries the kernel
        /// may still hold: invalidations queued when a look-up found the item under a new
        /// name, and not yet taken by the kernel (`VolumeObserver.nameLeftBehind`). An OPEN
        /// meanwhile may have come through an old name, which now leads nowhere (DESIGN.md 27).
        let oldNamesInKernel = Atomic<Int>(0)
        /// Until when (`MonotonicClock.now()`) the last such name still counts once the
        /// kernel dropped it; 0 when none ever did.
        let oldNameGraceUntil = Atomic<UInt64>(0)
        /// Nanoseconds an old name stays counted after the kernel dropped its entry: opens
        /// of the item meanwhile are answered ESTALE once and served on their retry.
        static let oldNameGrace: UInt64 = 20_000_000
        /// Regular files under `-o passthrough`: the backing registration and the handles of
        /// each kind open (`Passthrough`, DESIGN.md 29).
        let passthrough = Mutex<Passthrough.Kinds?>(nil)
        /// Directories: what the kernel may keep of the listing (DESIGN.md 34).
        let listing = Mutex(ListingCache())
        /// Directories: how often the kernel forgot an item last seen in this one, that
        /// still has a name, since the node was made: a listing the kernel cached names
        /// entries it no longer holds once this moved (`ListingCache`).
        let childrenForgotten = Atomic<UInt64>(0)
    }

    /// A node as a request reads it.
    struct View {
        let item: Item
        /// `Volume.outsideChangeEpoch` as read before the look-up that made the kernel's
        /// inode of the item (the first reference since it last forgot the item).
        let madeAt: UInt64
        let node: Node?
    }

    private struct Entry {
        let item: Item
        var lookups: UInt64
        let madeAt: UInt64
        var node: Node?
    }

    private final class Shard: Sendable {
        let entries = Mutex<[UInt64: Entry]>([:])
    }
    private static let shardCount = 64
    private let shards: [Shard] = (0..<NodeTable.shardCount).map { _ in Shard() }
    /// Bumped when every listing the kernel cached may be wrong (`ListingCache`).
    private let listingResets = Atomic<UInt64>(0)

    public init() {}

    /// A node's shard: a Fibonacci hash of its number.
    @inline(__always)
    private func shard(_ ino: UInt64) -> Shard { shards[Int(truncatingIfNeeded: (ino &* 0x9E37_79B9_7F4A_7C15) >> 58)] }

    @inline(__always)
    public func item(_ ino: UInt64) -> Item? { shard(ino).entries.withLock { $0[ino]?.item } }

    func view(_ ino: UInt64) -> View? {
        shard(ino).entries.withLock { table in table[ino].map { View(item: $0.item, madeAt: $0.madeAt, node: $0.node) } }
    }

    /// The node's state beyond its reference, made now if it has none; nil when the kernel
    /// does not hold the item.
    func node(_ ino: UInt64) -> Node? {
        shard(ino).entries.withLock { table -> Node? in
            guard let i = table.index(forKey: ino) else { return nil }
            if let node = table.values[i].node { return node }
            let node = Node()
            table.values[i].node = node
            return node
        }
    }

    /// The node's state if it was ever needed (no new one is made).
    func existingNode(_ ino: UInt64) -> Node? { shard(ino).entries.withLock { $0[ino]?.node } }

    // MARK: - ItemKeeper

    public func hold(_ inode: UInt64, epoch: UInt64, make: () throws(Errno) -> Item) throws(Errno) -> (item: Item, isNew: Bool) {
        let s = shard(inode)
        if let kept = s.entries.withLock({ NodeTable.hold(inode, in: &$0) }) { return (kept, false) }
        let fresh = try make()
        // The loser of a race is dropped out of the lock (it closes its descriptor).
        return s.entries.withLock { table in
            if let kept = NodeTable.hold(inode, in: &table) { return (kept, false) }
            table[inode] = Entry(item: fresh, lookups: 1, madeAt: epoch, node: nil)
            return (fresh, true)
        }
    }

    /// One more reference to the entry of `inode`, counted in place; nil when there is none.
    @inline(__always)
    private static func hold(_ inode: UInt64, in table: inout [UInt64: Entry]) -> Item? {
        guard let i = table.index(forKey: inode) else { return nil }
        table.values[i].lookups += 1
        return table.values[i].item
    }

    /// FORGET, or a hold not handed on: drops `count` references; at zero the node goes,
    /// and with it the table's hold on the item. The root is never let go of.
    public func release(_ ino: UInt64, count: UInt64) {
        guard ino != Volume.rootInode else { return }
        // The item may go with the node (its descriptor is closed as it does): it is handed
        // out of this lock and dropped there.
        let gone = shard(ino).entries.withLock { table -> Item? in
            guard let i = table.index(forKey: ino) else { return nil }
            if table.values[i].lookups > count {
                table.values[i].lookups -= count
                return nil
            }
            let item = table.remove(at: i).value.item
            item.wasLetGo()
            return item
        }
        guard let item = gone, let (parent, _) = item.placement, let listed = existingNode(parent) else { return }
        // A listing the parent's kernel cache holds names the item no more once it was
        // removed (the journal SQLite deletes at every commit): its forgetting gives
        // READDIRPLUS nothing to prime, and must not start the listing afresh (DESIGN.md 36).
        // A parent with no node state has no listing cached.
        if !item.isVirtual, let st = try? Syscall.fstat(item.fd), st.st_nlink == 0 { return }
        listed.childrenForgotten.add(1, ordering: .relaxed)
    }

    public func allInodes() -> [UInt64] {
        shards.flatMap { s in s.entries.withLock { Array($0.keys) } }
    }

    /// DESTROY: the kernel forgets every node at once.
    func removeAll() {
        // Each shard's entries are handed out of its lock and dropped there (see `release`).
        for s in shards {
            _ = s.entries.withLock { table -> [UInt64: Entry] in
                defer { table = [:] }
                for entry in table.values { entry.item.wasLetGo() }
                return table
            }
        }
    }

    // MARK: - Old names the kernel may still hold (DESIGN.md 27)

    /// Old names on their way out of the kernel, of every node, and the end of the latest
    /// grace: an OPEN while there are none looks no node up.
    private let oldNamesAnywhere = Atomic<Int>(0)
    private let latestOldNameGrace = Atomic<UInt64>(0)

    /// An invalidation of a name the kernel may hold of `inode` is on its way; counted
    /// before the item follows the move (`VolumeObserver.nameLeftBehind`). Nil when the
    /// kernel does not hold the item.
    func oldNameQueued(_ inode: UInt64) -> Node? {
        guard let node = node(inode) else { return nil }
        oldNamesAnywhere.add(1, ordering: .releasing)
        node.oldNamesInKernel.add(1, ordering: .releasing)
        return node
    }

    /// The kernel dropped the entry: it counts for `Node.oldNameGrace` more.
    func oldNameTaken(_ node: Node) {
        let until = MonotonicClock.now() + Node.oldNameGrace
        node.oldNameGraceUntil.max(until, ordering: .relaxed)
        latestOldNameGrace.max(until, ordering: .relaxed)
        node.oldNamesInKernel.subtract(1, ordering: .releasing)
        oldNamesAnywhere.subtract(1, ordering: .releasing)
    }

    /// Whether the kernel may still reach the item of `inode` through a name it had in the
    /// store before a move there.
    func mayBeReachedThroughOldName(_ inode: UInt64) -> Bool {
        if oldNamesAnywhere.load(ordering: .acquiring) == 0 {
            let grace = latestOldNameGrace.load(ordering: .relaxed)
            if grace == 0 || MonotonicClock.now() >= grace { return false }
        }
        guard let node = existingNode(inode) else { return false }
        if node.oldNamesInKernel.load(ordering: .acquiring) > 0 { return true }
        let grace = node.oldNameGraceUntil.load(ordering: .relaxed)
        return grace != 0 && MonotonicClock.now() < grace
    }

    // MARK: - Listings the kernel caches (DESIGN.md 34)

    /// An OPENDIR of `node`: whether the kernel may cache what the handle lists and list
    /// from its cache, for a listing up to `maxAge` nanoseconds old.
    func openedListing(_ node: Node, maxAge: UInt64) -> ListingCache.Answer {
        let context = ListingCache.Context(now: MonotonicClock.now(), childrenForgotten: node.childrenForgotten.load(ordering: .relaxed),
                                           resets: listingResets.load(ordering: .acquiring), maxAge: maxAge)
        return node.listing.withLock { $0.opened(context) }
    }

    public func listingChanged(_ directory: UInt64) {
        existingNode(directory)?.listing.withLock { $0.changed() }
    }

    /// Lost events (the watcher's queue overflowed): every listing may have changed.
    public func resync() {
        listingResets.add(1, ordering: .releasing)
    }

    public func entryChanged(parent: UInt64, name: FilePath.Component) {}
    public func itemChanged(_ inode: UInt64) {}
}

/// An open directory as the bridge hands it to the kernel: the core's handle, and what the
/// OPENDIR was answered as to the kernel's cached listing, which the handle feeds until the
/// kernel releases it (RELEASEDIR).
final class OpenDirectory: Sendable {
    let handle: DirectoryHandle
    /// The directory's node state, when the listing was asked about.
    let node: NodeTable.Node?
    /// Nil: not asked (the store watcher could not vouch for the store).
    let listing: ListingCache.Answer?

    init(_ handle: DirectoryHandle, node: NodeTable.Node?, listing: ListingCache.Answer?) {
        self.handle = handle
        self.node = node
        self.listing = listing
    }

    /// The kernel may cache what this handle lists, and list from its cache
    /// (`FOPEN_CACHE_DIR` and `FOPEN_KEEP_CACHE`).
    var cachesListing: Bool { listing?.generation != nil }
    /// The kernel's cached listing must be dropped before the OPENDIR is answered.
    var startsListingAfresh: Bool { if case .fresh = listing { true } else { false } }

    deinit {
        if let generation = listing?.generation { node?.listing.withLock { $0.released(generation: generation) } }
    }
}
