import FileManagerCore
import Glibc
import Synchronization
import SystemPackage

/// The nodes the kernel holds: for each node id (the item's inode number, DESIGN.md 60),
/// the core's item and the kernel's lookup count (FUSE's `nlookup`: one per LOOKUP,
/// CREATE, MKDIR, MKNOD, SYMLINK, LINK or READDIRPLUS entry answered, given back by
/// FORGET). The table holds the items strongly, so an item (and its `O_PATH` descriptor)
/// lives exactly as long as the kernel has a reference to it, or a request or open handle
/// still uses it; the core keeps no count of its own (`ItemTable`).
///
/// A node also keeps what only the kernel's view of the item needs (`Node`): as an observer
/// of the volume, the table hears which directories' listings changed unseen.
///
/// Sharded like the core's table: requests of unrelated nodes do not contend.
final class NodeTable: VolumeObserver, Sendable {
    /// What the kernel holds of one item.
    final class Node: Sendable {
        let item: Item
        /// `Volume.outsideChangeEpoch` as read before the answer that made the kernel's
        /// inode of the item (the first reference since it last forgot the item).
        let madeAt: UInt64
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
        /// still has a name: a listing the kernel cached names entries it no longer holds
        /// once this moved (`ListingCache`).
        let childrenForgotten = Atomic<UInt64>(0)

        init(item: Item, madeAt: UInt64) {
            self.item = item
            self.madeAt = madeAt
        }
    }

    private struct Entry {
        let node: Node
        var lookups: UInt64
    }

    private final class Shard: Sendable {
        let entries = Mutex<[UInt64: Entry]>([:])
    }
    private let shards: [Shard] = (0..<ItemTable.shardCount).map { _ in Shard() }
    /// Bumped when every listing the kernel cached may be wrong (`ListingCache`).
    private let listingResets = Atomic<UInt64>(0)

    @inline(__always)
    private func shard(_ ino: UInt64) -> Shard { shards[ItemTable.shardIndex(ino)] }

    @inline(__always)
    func item(_ ino: UInt64) -> Item? { shard(ino).entries.withLock { $0[ino]?.node.item } }

    func node(_ ino: UInt64) -> Node? { shard(ino).entries.withLock { $0[ino]?.node } }

    /// One more kernel reference to `item`, counted before the answer that gives it leaves
    /// (the kernel may send FORGET the moment it has the answer). `epoch`: see `Node.madeAt`.
    /// Returns the node, and whether it is new (the kernel makes a new inode for it).
    @discardableResult
    func add(_ item: Item, madeAt epoch: UInt64) -> (node: Node, isNew: Bool) {
        shard(item.inode).entries.withLock { table in
            if var entry = table[item.inode] {
                entry.lookups += 1
                table[item.inode] = entry
                return (entry.node, false)
            }
            let node = Node(item: item, madeAt: epoch)
            table[item.inode] = Entry(node: node, lookups: 1)
            return (node, true)
        }
    }

    /// A node the kernel never forgets (the root).
    func addPermanent(_ item: Item) {
        shard(item.inode).entries.withLock { $0[item.inode] = Entry(node: Node(item: item, madeAt: 0), lookups: UInt64.max / 2) }
    }

    /// FORGET: drops `count` references; at zero the node goes, and with it the table's
    /// hold on the item.
    func forget(_ ino: UInt64, count: UInt64) {
        // The item may go with the node: it leaves the core's table as it does, which takes
        // that table's locks, so the node is handed out of this lock and dropped there.
        let gone = shard(ino).entries.withLock { table -> Node? in
            guard var entry = table[ino] else { return nil }
            entry.lookups = entry.lookups > count ? entry.lookups - count : 0
            if entry.lookups > 0 {
                table[ino] = entry
                return nil
            }
            table[ino] = nil
            return entry.node
        }
        guard let item = gone?.item, let (parent, _) = item.placement else { return }
        // A listing the parent's kernel cache holds names the item no more once it was
        // removed (the journal SQLite deletes at every commit): its forgetting gives
        // READDIRPLUS nothing to prime, and must not start the listing afresh (DESIGN.md 36).
        if !item.isVirtual, let st = try? Syscall.fstat(item.fd), st.st_nlink == 0 { return }
        node(parent)?.childrenForgotten.add(1, ordering: .relaxed)
    }

    /// DESTROY: the kernel forgets every node at once.
    func removeAll() {
        // Each shard's entries are handed out of its lock and dropped there (see `forget`).
        for s in shards {
            _ = s.entries.withLock { table -> [UInt64: Entry] in
                defer { table = [:] }
                return table
            }
        }
    }

    // MARK: - Listings the kernel caches (DESIGN.md 34)

    /// An OPENDIR of `node`: whether the kernel may cache what the handle lists and list
    /// from its cache, for a listing up to `maxAge` nanoseconds old.
    func openedListing(_ node: Node, maxAge: UInt64) -> ListingCache.Answer {
        let context = ListingCache.Context(now: MonotonicClock.now(), childrenForgotten: node.childrenForgotten.load(ordering: .relaxed),
                                           resets: listingResets.load(ordering: .acquiring), maxAge: maxAge)
        return node.listing.withLock { $0.opened(context) }
    }

    func listingChanged(_ directory: UInt64) {
        node(directory)?.listing.withLock { $0.changed() }
    }

    /// Lost events (the watcher's queue overflowed): every listing may have changed.
    func resync() {
        listingResets.add(1, ordering: .releasing)
    }

    func entryChanged(parent: UInt64, name: FilePath.Component) {}
    func itemChanged(_ inode: UInt64) {}
}

/// An open directory as the bridge hands it to the kernel: the core's handle, and what the
/// OPENDIR was answered as to the kernel's cached listing, which the handle feeds until the
/// kernel releases it (RELEASEDIR).
final class OpenDirectory: Sendable {
    let handle: DirectoryHandle
    let node: NodeTable.Node
    /// Nil: not asked (the store watcher could not vouch for the store).
    let listing: ListingCache.Answer?

    init(_ handle: DirectoryHandle, node: NodeTable.Node, listing: ListingCache.Answer?) {
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
        if let generation = listing?.generation { node.listing.withLock { $0.released(generation: generation) } }
    }
}
