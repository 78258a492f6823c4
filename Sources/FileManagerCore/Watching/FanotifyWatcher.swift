import CLinux
import Dispatch
import Foundation
import Glibc
import Logging
import Synchronization
import SystemPackage

/// What the bridge needs of a store watcher: whether it sees every change (long cache
/// timeouts), and catching up with the changes made before a request (DESIGN.md 27).
/// `StoreWatcher` (inotify, the default) and `FanotifyWatcher` (`-o watcher=fanotify`).
public protocol StoreWatching: AnyObject, Sendable {
    /// False while some change could go unseen: the mount uses short cache timeouts.
    var isComplete: Bool { get }
    func start()
    func stop()
    func isCaughtUp(with inode: UInt64) -> Bool
    func whenCaughtUp(with inode: UInt64, _ then: @escaping @Sendable () -> Void)
    func readQueue()
    /// `inotify` or `fanotify` (`containerfs status`).
    var kind: String { get }
}

extension StoreWatcher: StoreWatching {
    public var isComplete: Bool { complete.load(ordering: .acquiring) }
    public var kind: String { "inotify" }
}

/// A store watcher on fanotify (issue 42, part 1; DESIGN.md 59; `-o watcher=fanotify`): one
/// mark on the whole file system of the store (`FAN_MARK_FILESYSTEM`, root only), events
/// reported with the directory's file handle and the entry's name (`FAN_REPORT_DFID_NAME`)
/// and the object's own handle (`FAN_REPORT_FID`), and the pid of the process that made
/// the change. An event whose pid is the daemon's own is an echo of its own change and is
/// dropped, with no guessing (`OwnChanges` stays disabled); every other event is an outside
/// change and becomes the same `VolumeObserver` calls the inotify watcher makes.
///
/// Events of the rest of the file system are dropped by handle: a directory or object
/// that is not an item the daemon holds has nothing cached in the kernel (an entry is
/// cached only under a directory the kernel holds). Handles map to inode numbers (node ids)
/// with `open_by_handle_at` + fstat, remembered per handle.
///
/// Under `-o passthrough` the kernel does reads and writes of open files in the caller's
/// context: those writes carry the caller's pid and are taken for outside changes, which
/// costs a redundant invalidation of the written file at its close, never a missed one.
///
/// Catching up (an OPEN): fsnotify queues an event before the change's system call
/// returns, so a drain of the queue to EAGAIN started after a request asked has heard of
/// every change made before it.
public final class FanotifyWatcher: StoreWatching, @unchecked Sendable {
    private let volume: Volume
    private let fan: CInt
    private let logger: Logger
    private let listener: (any StoreChangeListener)?
    private let ownPID = getpid()
    /// The store's root, opened for reading: the mount `open_by_handle_at` resolves handles in.
    private let mountFD: CInt
    /// `STORE/trash`: its entries (`.Trash-UID`) sit at the mount root, node 1.
    private let trashInode: UInt64
    private let running = Atomic<Bool>(true)
    private let started = Atomic<Bool>(false)
    private let wakeFD: CInt = clinux_eventfd()
    private let finished = DispatchSemaphore(value: 0)
    /// Held by whoever reads and handles events; guards `buffer`, `handles` and the counts.
    private let draining = Mutex<Void>(())
    /// Requests waiting for a drain that begins after they asked.
    private let waiters = Mutex<[(inode: UInt64, then: @Sendable () -> Void)]>([])
    static let bufferSize = 64 * 1024
    private let buffer = UnsafeMutableRawPointer.allocate(byteCount: FanotifyWatcher.bufferSize, alignment: 8)
    /// Inode numbers of the handles seen (`draining` held); forgotten past `handleCacheLimit`.
    private var handles: [[UInt8]: UInt64] = [:]
    private static let handleCacheLimit = 65_536
    /// Events read, the daemon's own, outside changes of the store, and the rest of the
    /// file system (`draining` held); logged at stop.
    private var counts = (events: 0, own: 0, outside: 0, elsewhere: 0)

    public var isComplete: Bool { true }
    private let debugEvents = getenv("CONTAINERFS_DEBUG_FANOTIFY") != nil
    public var kind: String { "fanotify" }

    /// Throws the errno of `fanotify_init` or `fanotify_mark` when fanotify cannot watch the
    /// store (not root: EPERM; a kernel without FID reporting: EINVAL; a file system
    /// without file handles: EOPNOTSUPP/ENODEV/EXDEV).
    public init(volume: Volume, listener: (any StoreChangeListener)? = nil,
                logger: Logger = Logger(label: "containerfs.watch")) throws(Errno) {
        self.volume = volume
        self.listener = listener
        self.logger = logger
        fan = clinux_fanotify_init()
        guard fan >= 0 else { throw Errno(rawValue: errno) }
        for fd in [volume.store.containersFD, volume.store.trashFD, volume.store.snapshotsFD]
        where clinux_fanotify_mark_filesystem(fan, fd) != 0 {
            let error = Errno(rawValue: errno)
            Glibc.close(fan)
            throw error
        }
        trashInode = (try? Syscall.fstat(volume.store.trashFD)).map { UInt64($0.st_ino) } ?? 0
        // open_by_handle_at takes no O_PATH descriptor for its mount.
        mountFD = (try? Syscall.openat(volume.store.rootFD, ".", O_RDONLY | O_DIRECTORY)) ?? -1
        guard mountFD >= 0 else {
            Glibc.close(fan)
            throw Errno(rawValue: errno)
        }
    }

    /// Whether this kernel and process can watch a file system with fanotify's FID
    /// reporting (nil) or why not.
    public static func unavailableReason(store: Store) -> Errno? {
        let fd = clinux_fanotify_init()
        guard fd >= 0 else { return Errno(rawValue: errno) }
        defer { Glibc.close(fd) }
        return clinux_fanotify_mark_filesystem(fd, store.containersFD) == 0 ? nil : Errno(rawValue: errno)
    }

    deinit { buffer.deallocate() }

    public func start() {
        started.store(true, ordering: .releasing)
        Threads.start(named: "cfs-fanotify") { [self] in
            loop()
            finished.signal()
        }
    }

    public func stop() {
        running.store(false, ordering: .releasing)
        wake()
        if started.load(ordering: .acquiring) { finished.wait() }
        let c = draining.withLock { _ in counts }
        logger.info("fanotify watcher: \(c.events) events, \(c.own) the daemon's own, \(c.outside) outside changes of the store, \(c.elsewhere) elsewhere on its file system")
    }

    // MARK: - Thread and catching up

    private func loop() {
        var pollers = [pollfd(fd: fan, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
        while running.load(ordering: .acquiring) {
            let ready = poll(&pollers, 2, -1)
            if ready <= 0 { continue }
            if pollers[1].revents != 0 { clearWake() }
            let released = draining.withLock { _ in
                // Taken before the drain: each asked before it began, so it covers them.
                let due = waiters.withLock { w in defer { w.removeAll() }; return w }
                drain(inline: true)
                return due
            }
            for w in released where !volume.afterObserversCaughtUp(with: w.inode, w.then) { w.then() }
        }
        for w in waiters.withLock({ w in defer { w.removeAll() }; return w }) { w.then() }
    }

    /// Drains here unless another thread is draining; false when one was.
    private func catchUpHere() -> Bool {
        draining.withLockIfAvailable { _ in drain(inline: false) } != nil
    }

    public func isCaughtUp(with inode: UInt64) -> Bool {
        catchUpHere() && !volume.observersHavePendingChanges(for: inode)
    }

    public func whenCaughtUp(with inode: UInt64, _ then: @escaping @Sendable () -> Void) {
        if catchUpHere() {
            if !volume.afterObserversCaughtUp(with: inode, then) { then() }
            return
        }
        waiters.withLock { $0.append((inode, then)) }
        wake()
    }

    public func readQueue() { _ = catchUpHere() }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    private func clearWake() {
        var count: UInt64 = 0
        _ = read(wakeFD, &count, 8)
    }

    // MARK: - Events

    /// Reads and handles events until the queue is empty; `draining` held. `inline`: on the
    /// watcher thread (observers may act at once), else a request thread (they queue it).
    private func drain(inline: Bool) {
        while true {
            let n = read(fan, buffer, Self.bufferSize)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            var offset = 0
            var event = clinux_fan_event()
            while true {
                let length = clinux_fanotify_parse(buffer, n, offset, &event)
                guard length > 0 else { break }
                handle(event, inline: inline)
                offset += length
            }
        }
    }

    private func handle(_ event: clinux_fan_event, inline: Bool) {
        counts.events += 1
        if event.mask & clinux_FAN_Q_OVERFLOW != 0 {
            logger.warning("fanotify queue overflowed; every item the kernel holds is invalidated")
            everythingChanged()
            return
        }
        if event.pid == ownPID {
            counts.own += 1
            return
        }
        var inStore = false
        // The directory of the entry (or of the object the event is about), if the kernel
        // holds it: only then can it cache anything under it.
        let dirInode = heldDirectory(event.dir)
        let name = event.name.flatMap { FilePath.Component(platformString: $0) }
        // The entry: made or removed.
        if event.mask & (clinux_FAN_CREATE | clinux_FAN_DELETE) != 0, let dirInode, let name {
            inStore = true
            entryChanged(dirInode, name, appeared: event.mask & clinux_FAN_CREATE != 0, inline: inline)
            if let listener, listener.wantsStoreChanges, let path = mountPath(dirInode, name) {
                listener.storeChanged(event.mask & clinux_FAN_CREATE != 0 ? .appeared(path) : .deleted(path))
            }
        }
        // Moved: both names in one event (a move into or out of what the kernel holds is
        // only a creation or a deletion for it).
        if event.mask & clinux_FAN_RENAME != 0 {
            let fromDir = heldDirectory(event.old_dir), toDir = heldDirectory(event.new_dir)
            let fromName = event.old_name.flatMap { FilePath.Component(platformString: $0) }
            let toName = event.new_name.flatMap { FilePath.Component(platformString: $0) }
            let wanted = listener?.wantsStoreChanges == true
            var from: FilePath?, to: FilePath?
            if let fromDir, let fromName {
                inStore = true
                entryChanged(fromDir, fromName, appeared: false, inline: inline)
                if wanted { from = mountPath(fromDir, fromName) }
            }
            if let toDir, let toName {
                inStore = true
                entryChanged(toDir, toName, appeared: true, inline: inline)
                if wanted { to = mountPath(toDir, toName) }
            }
            if let listener, wanted {
                switch (from, to) {
                case let (from?, to?): listener.storeChanged(.moved(from: from, to: to))
                case let (from?, nil): listener.storeChanged(.deleted(from))
                case let (nil, to?): listener.storeChanged(.appeared(to))
                case (nil, nil): break
                }
            }
        }
        // The object: its content, attributes or link count changed. Also one the kernel
        // does not hold yet in a directory it holds: a look-up racing the change may be
        // about to hand it the old state (`OutsideItemChanges`, the notifier's retries).
        if event.mask & (clinux_FAN_ATTRIB | clinux_FAN_CLOSE_WRITE | clinux_FAN_MODIFY) != 0, let object = event.object,
           let objectInode = inode(of: object) {
            let item = volume.item(objectInode)
            if item != nil || dirInode != nil {
                inStore = true
                let known = item?.placement ?? name.flatMap { n in dirInode.map { ($0 == trashInode ? Volume.rootInode : $0, n) } }
                itemChanged(objectInode, item, handle: object, knownAs: known, inline: inline)
            }
        }
        if inStore { counts.outside += 1 } else { counts.elsewhere += 1 }
        if debugEvents {
            let d = event.dir.flatMap { inode(of: $0) }, o = event.object.flatMap { inode(of: $0) }
            logger.info("fanotify event mask \(String(event.mask, radix: 16)) pid \(event.pid) dir \(d.map(String.init) ?? "-") name \(event.name.map { String(cString: $0) } ?? "-") object \(o.map(String.init) ?? "-") inStore \(inStore)")
        }
    }

    /// The inode of the directory a handle names, if the kernel may cache entries of it
    /// (an item it holds, or `STORE/trash`, whose entries sit at the mount root).
    private func heldDirectory(_ handle: UnsafeRawPointer?) -> UInt64? {
        guard let handle, let inode = inode(of: handle) else { return nil }
        return inode == trashInode || volume.item(inode) != nil ? inode : nil
    }

    /// An entry of the directory `dirInode` was made, removed, or moved there or away.
    private func entryChanged(_ dirInode: UInt64, _ name: FilePath.Component, appeared: Bool, inline: Bool) {
        let directoryNode = dirInode == trashInode ? Volume.rootInode : dirInode
        // A name may have gone: every item is due for a check of its name at its next OPEN.
        if !appeared { volume.items.outsideEntryEpoch.add(1, ordering: .releasing) }
        volume.listingChanged(directoryNode)
        if inline { volume.notify { $0.entryChangedOutside(parent: directoryNode, name: name) } }
        else { volume.notify { $0.entryChanged(parent: directoryNode, name: name) } }
        tellItemChanged(directoryNode, inline: inline)
    }

    /// The item changed outside the mount: the kernel's caches of it go (as
    /// `StoreWatcher.changedOutside`).
    private func itemChanged(_ inode: UInt64, _ item: Item?, handle: UnsafeRawPointer,
                             knownAs entry: (parent: UInt64, name: FilePath.Component)?, inline: Bool) {
        volume.outsideItemChanges.note(inode)  // before the table is asked again: see there
        volume.forgetCachedAttributes(inode)
        let item = item ?? volume.item(inode)
        guard let st = state(item, handle) else {
            tellItemChanged(inode, inline: inline, noted: true)
            return
        }
        let file = st.st_mode & S_IFMT == S_IFREG ? item : nil
        file?.pagesShow.store(ContentStamp.of(st), ordering: .relaxed)
        let held = volume.kernelCachesWrites ? file : nil
        if let held { volume.markChangedOutside(held) }
        tellItemChanged(inode, inline: inline, noted: true)
        if held != nil { volume.letGoOfOldInode(inode, knownAs: entry) }
        if let listener, listener.wantsStoreChanges, let (parent, name) = entry,
           let path = mountPath(parent == Volume.rootInode ? trashInode : parent, name) {
            listener.storeChanged(.changed(path))
        }
    }

    /// The item's state: by its descriptor if the daemon holds it, else by its handle.
    private func state(_ item: Item?, _ handle: UnsafeRawPointer) -> stat? {
        if let item, item.fd >= 0 { return try? Syscall.fstat(item.fd) }
        let fd = clinux_open_handle(mountFD, handle)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        return try? Syscall.fstat(fd)
    }

    private func tellItemChanged(_ inode: UInt64, inline: Bool, noted: Bool = false) {
        if !noted { volume.outsideItemChanges.note(inode) }
        if inline { volume.notify { $0.itemChangedOutside(inode) } } else { volume.notify { $0.itemChanged(inode) } }
    }

    /// After an overflow: every item the kernel holds is invalidated (as `StoreWatcher.rescan`).
    private func everythingChanged() {
        volume.outsideItemChanges.noteEverything()
        volume.items.outsideEntryEpoch.add(1, ordering: .releasing)
        volume.everyListingChanged()
        var files: [Item] = []
        for inode in volume.items.allInodes() {
            volume.forgetCachedAttributes(inode)
            if volume.kernelCachesWrites, let item = volume.items.item(inode), item.isRegularFile {
                volume.markChangedOutside(item)
                files.append(item)
            }
            volume.notify { $0.itemChanged(inode) }
        }
        for case let (parent, name)? in files.map(\.placement) { volume.dropOldInode(parent: parent, name: name) }
        volume.notify { $0.resync() }
        listener?.storeChanged(.resync(nil))
    }

    /// The inode number of the object a file handle names (nil: gone, or not openable);
    /// remembered, since the handles of a file system name one inode for good.
    private func inode(of handle: UnsafeRawPointer) -> UInt64? {
        let size = 8 + Int(handle.loadUnaligned(as: UInt32.self))
        let key = [UInt8](UnsafeRawBufferPointer(start: handle, count: size))
        if let known = handles[key] { return known }
        let fd = clinux_open_handle(mountFD, handle)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        guard let st = try? Syscall.fstat(fd) else { return nil }
        if handles.count >= Self.handleCacheLimit { handles.removeAll(keepingCapacity: true) }
        handles[key] = UInt64(st.st_ino)
        return UInt64(st.st_ino)
    }

    /// The mount path of `name` in the directory `dirInode` (an item, or `STORE/trash`), for
    /// presenters (as `StoreWatcher.relativePath`).
    private func mountPath(_ dirInode: UInt64, _ name: FilePath.Component) -> FilePath? {
        let fd = dirInode == trashInode ? volume.store.trashFD : volume.item(dirInode)?.fd ?? -1
        guard fd >= 0, let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)") else { return nil }
        var path = FilePath(target)
        guard path.removePrefix(volume.store.resolvedPath) else { return nil }
        path.root = "/"
        if path.components.first?.string == "trash" { path = FilePath(root: "/", path.components.dropFirst()) }
        return path.appending(name)
    }
}
