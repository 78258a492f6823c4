import CFuse
import FileManagerCore
import Glibc
import Logging
import Synchronization
import SystemPackage

/// Translates kernel requests into `Volume` calls and their results into replies. Nothing
/// else: no policy, no file-system logic (that is the core's), one method per opcode named
/// after it (go-fuse: "Method names are based on syscall names").
///
/// Node ids are the core's item numbers (the backing store's inode numbers; 1 is the
/// virtual root), so `st_ino`, `d_ino` and the node id agree (DESIGN.md, decision 4).
///
/// File handles (`fi->fh`) carry a retained `OpenFile` / `OpenDirectory` pointer, taken at
/// open and released at release: the kernel hands back only what we gave it, and a pointer
/// costs no table lookup on every read and write.
///
/// What the kernel holds of the core's items (lookup counts, cached listings, old names and
/// inodes) is the bridge's, in its `NodeTable` (DESIGN.md 61).
///
/// Sendable note: all state is immutable or lives in thread-safe types (`Volume`,
/// `NodeTable`).
public final class FUSEBridge: @unchecked Sendable {
    public let volume: Volume
    /// The items the kernel holds, with its lookup counts: the volume's `ItemKeeper`.
    let nodes: NodeTable
    /// What the kernel may cache while the store watcher sees every change...
    let coherentTimeouts: CacheTimeouts
    /// ...and what it may cache once it does not (watch limit reached): short, like an
    /// uncached passthrough.
    let fallbackTimeouts: CacheTimeouts
    let watcher: (any StoreWatching)?
    /// Coordination of kernel requests; nil serves them uncoordinated (tests of the bridge).
    public let coordination: MountCoordination?
    let parkedRequests = ParkedRequests()
    let staleOpens = StaleOpens()
    /// FUSE passthrough of open files' I/O (`-o passthrough`, DESIGN.md 29); nil when off.
    let passthrough: Passthrough?
    /// The kernel's FUSE protocol minor version, from INIT (0 before it): what notifications
    /// it understands (FUSE_NOTIFY_PRUNE from 45).
    let kernelMinor = Atomic<UInt32>(0)

    /// `nodes`: the table `volume` keeps its items in.
    public init(volume: Volume, nodes: NodeTable, timeouts: CacheTimeouts, fallbackTimeouts: CacheTimeouts = CacheTimeouts(),
                watcher: (any StoreWatching)?, coordination: MountCoordination?, passthrough: Bool = false) {
        self.volume = volume
        self.nodes = nodes
        self.passthrough = passthrough && !volume.kernelCachesWrites ? Passthrough() : nil
        self.coordination = coordination
        self.coherentTimeouts = timeouts
        self.fallbackTimeouts = fallbackTimeouts
        self.watcher = watcher
        volume.addObserver(nodes)
    }

    /// Whether the kernel may keep cached data and long-lived entries: only while every
    /// change to the store reaches us (then we invalidate), never on trust.
    @inline(__always)
    var isCoherent: Bool { watcher?.isComplete ?? false }

    @inline(__always)
    var timeouts: CacheTimeouts { isCoherent ? coherentTimeouts : fallbackTimeouts }

    // MARK: - Node and handle recovery

    @inline(__always)
    func node(_ ino: fuse_ino_t) -> Item? { nodes.item(UInt64(ino)) }

    /// Answers with the entry of `item`, which the core handed out held once for the
    /// kernel; the hold is given back if the kernel no longer waits for the answer.
    func answer(_ reply: consuming Reply, entry item: Item, _ st: stat) {
        if !reply.entry(item.inode, st, timeouts: timeouts) { nodes.release(item.inode, count: 1) }
    }

    @inline(__always)
    static func file(_ fi: UnsafeMutablePointer<fuse_file_info>?) -> OpenFile? {
        guard let fi, fi.pointee.fh != 0, let raw = UnsafeRawPointer(bitPattern: UInt(fi.pointee.fh)) else { return nil }
        return Unmanaged<OpenFile>.fromOpaque(raw).takeUnretainedValue()
    }

    @inline(__always)
    static func directory(_ fi: UnsafeMutablePointer<fuse_file_info>?) -> OpenDirectory? {
        guard let fi, fi.pointee.fh != 0, let raw = UnsafeRawPointer(bitPattern: UInt(fi.pointee.fh)) else { return nil }
        return Unmanaged<OpenDirectory>.fromOpaque(raw).takeUnretainedValue()
    }

    static func retain(_ object: AnyObject) -> UInt64 {
        UInt64(UInt(bitPattern: Unmanaged.passRetained(object).toOpaque()))
    }

    static func releaseHandle<T: AnyObject>(_ fh: UInt64, as: T.Type) {
        guard let raw = UnsafeRawPointer(bitPattern: UInt(fh)) else { return }
        Unmanaged<T>.fromOpaque(raw).release()
    }

    // MARK: - Lifecycle

    /// The largest WRITE (and so READ, READDIR...) payload: 1 MiB, 256 pages.
    static let maxWrite = 1 << 20

    /// INIT: ask for what makes the hot path cheap (see DESIGN.md, decision 9).
    func initialize(_ conn: UnsafeMutablePointer<fuse_conn_info>) {
        kernelMinor.store(UInt32(conn.pointee.proto_minor), ordering: .releasing)
        bridgeLogger.info("kernel FUSE protocol \(conn.pointee.proto_major).\(conn.pointee.proto_minor)")
        var want = conn.pointee.want
        let capable = conn.pointee.capable
        // Splice for replies (reads go from the backing file to the kernel without a copy),
        // not for requests: `CFuseTap` must see each WRITE's header (FUSE_WRITE_KILL_SUIDGID),
        // which a spliced request hides from it, and splicing write payloads in through a pipe
        // cost more than it saved in the benchmark (see docs/PERFORMANCE.md).
        want &= ~UInt32(FUSE_CAP_SPLICE_READ)
        // Set-ID bits: libfuse wishes for FUSE_CAP_HANDLE_KILLPRIV (v1) by default, which
        // would leave clearing them on write/truncate/chown to us without telling us when;
        // instead the kernel clears them itself (a kernel without v2) or tells us per
        // request (KILLPRIV_V2 through the tap, DESIGN.md 24).
        want &= ~UInt32(FUSE_CAP_HANDLE_KILLPRIV)
        for cap in [FUSE_CAP_SPLICE_WRITE, FUSE_CAP_READDIRPLUS,
                    FUSE_CAP_READDIRPLUS_AUTO, FUSE_CAP_PARALLEL_DIROPS, FUSE_CAP_ASYNC_DIO,
                    FUSE_CAP_ATOMIC_O_TRUNC, FUSE_CAP_CACHE_SYMLINKS] where capable & UInt32(cap) != 0 {
            want |= UInt32(cap)
        }
        // Cached pages are dropped when the store changes behind the mount: by the watcher's
        // explicit invalidation while it sees every directory (DESIGN.md 26), else by the
        // kernel itself when a refresh shows a new mtime (auto_inval_data). With the watcher,
        // auto_inval_data would only throw away pages our own writes just filled. Decided for
        // a watcher still walking the store too: opens keep no pages until it is complete.
        if watcher != nil {
            want &= ~UInt32(FUSE_CAP_AUTO_INVAL_DATA)
        } else if capable & UInt32(FUSE_CAP_AUTO_INVAL_DATA) != 0 {
            want |= UInt32(FUSE_CAP_AUTO_INVAL_DATA)
        }
        // Writeback caching (DESIGN.md, decision 22): writes land in the page cache and reach
        // us later, without their writer; coordination then happens at open.
        if volume.kernelCachesWrites && capable & UInt32(FUSE_CAP_WRITEBACK_CACHE) != 0 {
            want |= UInt32(FUSE_CAP_WRITEBACK_CACHE)
        } else {
            want &= ~UInt32(FUSE_CAP_WRITEBACK_CACHE)
        }
        conn.pointee.want = want
        conn.pointee.max_write = UInt32(Self.maxWrite)
        conn.pointee.max_readahead = 1 << 20
        conn.pointee.time_gran = 1
    }

    /// DESTROY (unmount): the kernel forgets every node at once.
    func destroy() {
        nodes.removeAll()
    }

    // MARK: - Names

    /// LOOKUP: one more kernel reference to the entry; misses are cached as negative entries.
    /// It may be the fresh walk of an open answered ESTALE, which the retry follows (`StaleOpens`).
    func lookup(_ reply: consuming Reply, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        guard let dir = node(parent) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        do {
            let (item, st) = try volume.lookup(dir, name)
            staleOpens.lookedUp(reply.caller.pid, parent: dir.inode, name: name, found: item)
            gaveName(name, in: dir, to: item)
            answer(reply, entry: item, st)
        } catch {
            staleOpens.lookedUp(reply.caller.pid, parent: dir.inode, name: name, found: nil)
            if error == .noSuchFileOrDirectory && timeouts.negative > 0 { return reply.negativeEntry(timeouts: timeouts) }
            reply.fail(error)
        }
    }

    /// FORGET: drops `count` kernel references; the item (and its descriptor) goes at zero.
    func forget(_ reply: consuming Reply, _ ino: fuse_ino_t, _ count: UInt64) {
        nodes.release(UInt64(ino), count: count)
        reply.none()
    }

    func forgetMany(_ reply: consuming Reply, _ count: Int, _ list: UnsafeMutablePointer<fuse_forget_data>?) {
        if let list {
            for i in 0..<count { nodes.release(UInt64(list[i].ino), count: list[i].nlookup) }
        }
        reply.none()
    }

    func getattr(_ reply: consuming Reply, _ ino: fuse_ino_t) {
        guard let item = node(ino) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        do {
            reply.attributes(try volume.attributes(item), timeout: timeouts.attributes)
        } catch {
            reply.fail(error)
        }
    }

    /// SETATTR: a write; changing only mode, owner or access time is metadata-only (the
    /// content modification date is content, docs/SEMANTICS.md §3.2).
    func setattr(_ reply: consuming Reply, _ ino: fuse_ino_t, _ attr: stat, _ toSet: CInt, _ fi: UnsafeMutablePointer<fuse_file_info>?,
                 clearsSetID: Bool) {
        guard let item = node(ino) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        if refusesBeforeWaiting(item) { return reply.fail(Errno.readOnlyFileSystem) }
        // Under writeback the kernel writes its times back after every rename and unlink
        // (`fuse_update_ctime`: mtime as it was, and a ctime no file system call can set).
        // Nothing changes, so nothing is coordinated or announced to presenters.
        if volume.kernelCachesWrites && toSet & ~FUSE_SET_ATTR_CTIME == FUSE_SET_ATTR_MTIME,
           item.isRegularFile, !volume.zone(of: item).isReadOnly,
           let st = try? volume.attributes(item),
           st.st_mtim.tv_sec == attr.st_mtim.tv_sec && st.st_mtim.tv_nsec == attr.st_mtim.tv_nsec {
            return reply.attributes(st, timeout: timeouts.attributes)
        }
        var changes = AttributeChanges()
        if toSet & FUSE_SET_ATTR_MODE != 0 { changes.mode = attr.st_mode }
        if toSet & FUSE_SET_ATTR_UID != 0 { changes.uid = attr.st_uid }
        if toSet & FUSE_SET_ATTR_GID != 0 { changes.gid = attr.st_gid }
        if toSet & FUSE_SET_ATTR_SIZE != 0 {
            changes.size = attr.st_size
            changes.caller = reply.caller(clearingSetID: clearsSetID)
        }
        if toSet & FUSE_SET_ATTR_ATIME_NOW != 0 { changes.accessTime = .now }
        else if toSet & FUSE_SET_ATTR_ATIME != 0 { changes.accessTime = .set(attr.st_atim) }
        if toSet & FUSE_SET_ATTR_MTIME_NOW != 0 { changes.modificationTime = .now }
        else if toSet & FUSE_SET_ATTR_MTIME != 0 { changes.modificationTime = .set(attr.st_mtim) }
        let file = FUSEBridge.file(fi)
        let contentChange = changes.size != nil || toSet & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW) != 0
        coordinate(reply, RequestNames(), {
            Coordination(claims: [Claim(target: coordination!.target(of: item),
                                        writing: contentChange ? [] : .contentIndependentMetadataOnly)],
                         event: volume.mountPath(of: item).map { .changed($0) })
        }) { [self, changes] reply, _ in
            do {
                let st = try volume.setAttributes(item, changes, handle: file)
                reply.attributes(st, timeout: timeouts.attributes)
            } catch {
                reply.fail(error)
            }
        }
    }

    func readlink(_ reply: consuming Reply, _ ino: fuse_ino_t) {
        guard let item = node(ino) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        do { reply.link(try volume.readlink(item)) } catch { reply.fail(error) }
    }

    // MARK: - Creating and removing

    /// The plan of a request that creates `name` in `parent`: a write ForReplacing on the
    /// new name (something may be there by the time it runs), then `subitemDidAppear`.
    func creating(_ name: UnsafePointer<CChar>, in parent: Item) -> Coordination {
        Coordination(claims: [Claim(target: coordination!.target(of: name, in: parent), writing: .forReplacing)],
                     namespace: true, event: volume.mountPath(of: name, in: parent).map { .appeared($0) })
    }

    /// The plan of a request that deletes `name` in `parent`: a write ForDeleting (a subtree
    /// write for a directory), presenters accommodate the deletion, then `didDelete`.
    func deleting(_ name: UnsafePointer<CChar>, in parent: Item) -> Coordination {
        Coordination(claims: [Claim(target: coordination!.target(of: name, in: parent), writing: .forDeleting)],
                     namespace: true, event: volume.mountPath(of: name, in: parent).map { .deleted($0) })
    }

    func mknod(_ reply: consuming Reply, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t, _ rdev: dev_t) {
        guard let dir = node(parent) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        if refusesBeforeWaiting(dir) { return reply.fail(Errno.readOnlyFileSystem) }
        let caller = reply.caller
        coordinate(reply, RequestNames(name), { creating(name, in: dir) }) { [self] reply, names in
            do {
                let (item, st) = try volume.mknod(dir, names.first, mode: mode, device: rdev, caller: caller)
                answer(reply, entry: item, st)
            } catch {
                reply.fail(error)
            }
        }
    }

    func mkdir(_ reply: consuming Reply, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>, _ mode: mode_t) {
        guard let dir = node(parent) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        if refusesBeforeWaiting(dir) { return reply.fail(Errno.readOnlyFileSystem) }
        let caller = reply.caller
        coordinate(reply, RequestNames(name), { creating(name, in: dir) }) { [self] reply, names in
            do {
                let (item, st) = try volume.mkdir(dir, names.first, mode: mode, caller: caller)
                answer(reply, entry: item, st)
            } catch {
                reply.fail(error)
            }
        }
    }

    func symlink(_ reply: consuming Reply, _ target: UnsafePointer<CChar>, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        guard let dir = node(parent) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        if refusesBeforeWaiting(dir) { return reply.fail(Errno.readOnlyFileSystem) }
        let caller = reply.caller
        coordinate(reply, RequestNames(name, target), { creating(name, in: dir) }) { [self] reply, names in
            do {
                let (item, st) = try volume.symlink(names.second, dir, names.first, caller: caller)
                answer(reply, entry: item, st)
            } catch {
                reply.fail(error)
            }
        }
    }

    func link(_ reply: consuming Reply, _ ino: fuse_ino_t, _ newParent: fuse_ino_t, _ newName: UnsafePointer<CChar>) {
        guard let item = node(ino), let dir = node(newParent) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        if refusesBeforeWaiting(dir) { return reply.fail(Errno.readOnlyFileSystem) }
        coordinate(reply, RequestNames(newName), { creating(newName, in: dir) }) { [self] reply, names in
            do {
                let (linked, st) = try volume.link(item, dir, names.first)
                answer(reply, entry: linked, st)
            } catch {
                reply.fail(error)
            }
        }
    }

    func unlink(_ reply: consuming Reply, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        guard let dir = node(parent) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        if refusesBeforeWaiting(dir) { return reply.fail(Errno.readOnlyFileSystem) }
        coordinate(reply, RequestNames(name), { deleting(name, in: dir) }) { [self] reply, names in
            do { try volume.unlink(dir, names.first); reply.ok() } catch { reply.fail(error) }
        }
    }

    func rmdir(_ reply: consuming Reply, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>) {
        guard let dir = node(parent) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        if refusesBeforeWaiting(dir) { return reply.fail(Errno.readOnlyFileSystem) }
        coordinate(reply, RequestNames(name), { deleting(name, in: dir) }) { [self] reply, names in
            do { try volume.rmdir(dir, names.first); reply.ok() } catch { reply.fail(error) }
        }
    }

    /// RENAME: a write ForMoving on the source and ForReplacing on the destination, taken
    /// together in canonical order (docs/SEMANTICS.md §3.6), then `didMove`.
    func rename(_ reply: consuming Reply, _ parent: fuse_ino_t, _ name: UnsafePointer<CChar>,
                _ newParent: fuse_ino_t, _ newName: UnsafePointer<CChar>, _ flags: UInt32) {
        guard let from = node(parent), let to = node(newParent) else { return reply.fail(Errno.noSuchFileOrDirectory) }
        if refusesBeforeWaiting(from) || refusesBeforeWaiting(to) { return reply.fail(Errno.readOnlyFileSystem) }
        coordinate(reply, RequestNames(name, newName), {
            let source = coordination!.target(of: name, in: from), destination = coordination!.target(of: newName, in: to)
            let event: PresenterEvent? = volume.mountPath(of: name, in: from).flatMap { old in
                volume.mountPath(of: newName, in: to).map { .moved(from: old, to: $0) }
            }
            return Coordination(claims: [Claim(target: source, writing: .forMoving), Claim(target: destination, writing: .forReplacing)],
                                namespace: true, event: event)
        }) { [self] reply, names in
            do { try volume.rename(from, names.first, to, names.second, flags: flags); reply.ok() } catch { reply.fail(error) }
        }
    }
}
