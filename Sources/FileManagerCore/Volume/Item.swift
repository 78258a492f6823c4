import Glibc
import Synchronization
import SystemPackage

/// A live item of the store the daemon knows about: one per backing inode, holding an
/// `O_PATH | O_NOFOLLOW` descriptor so that every later request works relative to it
/// (`*at()` calls) and never resolves a path again (passthrough_ll's `lo_inode`).
///
/// The descriptor also pins the inode: while an `Item` lives, its inode number cannot be
/// reused by the backing file system, so the number identifies it (`ItemTable`).
///
/// Sendable note: `fd`, `inode` and `type` never change; everything else lives in `state`,
/// behind its own mutex.
public final class Item: @unchecked Sendable {
    /// The number the item is known by: the backing store's inode number (docs/SEMANTICS.md §1), or a
    /// reserved number for the virtual root.
    public let inode: UInt64
    /// `O_PATH` descriptor on the backing item; -1 for the virtual root.
    public let fd: CInt
    /// `st_mode & S_IFMT`: an inode's type never changes.
    public let type: mode_t

    struct State {
        /// The directory this item was last seen in, for recomputing `zone` after a move.
        var parent: Item?
        /// The name it was last seen under (bytes, never decoded).
        var name: FilePath.Component?
        var zone: Zone
        /// `ItemTable.zoneEpoch` when `zone` was computed.
        var zoneEpoch: UInt64
        /// Known to carry no `security.capability` attribute: the kernel asks for it before
        /// every write (file capabilities must be dropped on write), so the answer is kept.
        /// Cleared by any `security.*` change and by any change seen in the store.
        var knownWithoutCapability = false
        /// Bumped by every forgetting of cached attributes, so a lookup racing a change
        /// cannot re-learn a stale answer.
        var attributeGeneration: UInt64 = 0
        /// A file with several names (hard links): the names other than `name` the kernel
        /// was given for it (a link made through the mount, a look-up of another link),
        /// which an open checks as it checks `name` (`Volume.wasReplacedInStore`): the
        /// OPEN carries no name, and one through a name the store moved or replaced since
        /// would reach this file. At most `Item.otherNamesLimit`; further names are not
        /// checked.
        var otherNames: [(parent: Item, name: FilePath.Component)] = []

        /// Where `name` in `parent` is among `otherNames`.
        func otherNameIndex(_ parent: Item, _ name: FilePath.Component) -> Int? {
            otherNames.firstIndex { $0.parent === parent && $0.name == name }
        }
    }
    static let otherNamesLimit = 8
    let state: Mutex<State>
    /// `ItemTable.outsideEntryEpoch` when the kernel last resolved a name to this item, or
    /// when an open last found that its name still leads here (`wasReplacedInStore`).
    let resolvedEpoch = Atomic<UInt64>(0)
    /// Under `-o writeback`: the `outsideEntryEpoch` given to the last change of this
    /// regular file's content or times made outside the mount (`Volume.markChangedOutside`);
    /// 0 while none was seen.
    let changedOutside = Atomic<UInt64>(0)
    public var changedOutsideEpoch: UInt64 { changedOutside.load(ordering: .acquiring) }
    /// Regular files: the daemon's own changes under way (handles with write access,
    /// `setattr`s, extended attribute changes): a snapshot must not link the file's data
    /// meanwhile (`ItemTable.isWriting`).
    let changesUnderWay = Atomic<Int>(0)
    /// Counted in `ItemTable.holdsLinkedFiles`: seen with more than one name.
    let countedAsLinked = Atomic<Bool>(false)
    /// Marked by the store watcher (`FileWatching`).
    let fileWatched = Atomic<Bool>(false)
    /// Regular files: opens for writing under way, counted before they look whether a
    /// snapshot shares the data (`Volume.keepSnapshotsFrozen`).
    let writableOpensStarting = Atomic<Int>(0)
    /// Open file handles on the item (`OpenFile`s alive): such an item's dentry is in use,
    /// and shedding descriptors leaves it alone (DESIGN.md 28).
    let openHandles = Atomic<Int>(0)

    /// The table whose keeper keeps the item.
    private let table: ItemTable

    init(inode: UInt64, fd: CInt, type: mode_t, zone: Zone, parent: Item?, name: FilePath.Component?, epoch: UInt64,
         table: ItemTable) {
        self.inode = inode
        self.fd = fd
        self.type = type
        self.table = table
        self.state = Mutex(State(parent: parent, name: name, zone: zone, zoneEpoch: epoch))
    }

    deinit {
        if fd >= 0 { Syscall.close(fd) }
    }

    /// Called by the keeper as it lets go of the item (`ItemKeeper.release`).
    public func wasLetGo() { table.departing(self) }

    /// The directory (by inode) and name the item was last seen under; nil for the root.
    public var placement: (parent: UInt64, name: FilePath.Component)? {
        state.withLock { s in
            guard let parent = s.parent, let name = s.name else { return nil }
            return (parent.inode, name)
        }
    }

    public var isDirectory: Bool { type == S_IFDIR }
    public var isSymlink: Bool { type == S_IFLNK }
    public var isRegularFile: Bool { type == S_IFREG }
    public var isVirtual: Bool { fd < 0 }
    /// Whether a file handle of the mount is open on it.
    public var isOpen: Bool { openHandles.load(ordering: .relaxed) > 0 }

    /// Runs a change the daemon makes to the item, counted on `changesUnderWay` for a
    /// regular file.
    func changing<R>(_ body: () throws(Errno) -> R) throws(Errno) -> R {
        guard isRegularFile else { return try body() }
        changesUnderWay.add(1, ordering: .acquiring)
        defer { changesUnderWay.subtract(1, ordering: .releasing) }
        return try body()
    }
}
