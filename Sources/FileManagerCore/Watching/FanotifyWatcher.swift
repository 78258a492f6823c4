import CLinux
import Dispatch
import Foundation
import Glibc
import Logging
import Synchronization
import SystemPackage

/// The store watcher (DESIGN.md 59): fanotify, with events reported with the directory's
/// file handle and the entry's name (`FAN_REPORT_DFID_NAME`), the object's own handle
/// (`FAN_REPORT_FID`), and the pid of the process that made the change. An event whose
/// pid is the daemon's own is an echo of its own change and is dropped, with no guessing;
/// every other event is an outside change and becomes `VolumeObserver` calls.
///
/// How the store is marked (`Marking`): when the store is the root of a file system of
/// its own and the daemon is root, one mark on that file system (`FAN_MARK_FILESYSTEM`);
/// else one mark per directory of `containers/`, `trash/` and `snapshots/`, taken at start
/// and for each directory made or moved in, with the events of their entries
/// (`FAN_EVENT_ON_CHILD`). A whole-file-system mark on a disk shared with other programs
/// would bring in all their changes, and under a storm of them the queue overflows.
///
/// Events of directories the kernel holds nothing under are dropped by handle (an entry is
/// cached only under a directory the kernel holds); presenters still hear of every change
/// in the store. Handles map to inode numbers (node ids): read from the handle on ext2/3/4,
/// else with `open_by_handle_at` + fstat (root only), remembered per handle.
///
/// Under `-o passthrough` the kernel does reads and writes of open files in the caller's
/// context: those writes carry the caller's pid and are taken for outside changes, which
/// costs a redundant invalidation of the written file per burst of writes (FAN_MODIFY),
/// never a missed one.
///
/// Catching up (an OPEN): fsnotify queues an event before the change's system call
/// returns, so handling the events queued when a request asked (FIONREAD) hears of every
/// change made before it; not the queue to its end, which other programs' changes may
/// never let empty.
public final class FanotifyWatcher: StoreWatching, FileWatching, @unchecked Sendable {
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
    private let walkFinished = DispatchSemaphore(value: 0)
    /// Held by whoever reads and handles events; guards `buffer`, `handles` and the counts.
    private let draining = Mutex<Void>(())
    /// Requests waiting for a drain that begins after they asked.
    /// Each waits until `handled` reaches its `until`: the events read before it asked and
    /// those queued then (`whenCaughtUp`).
    private let waiters = Mutex<[(inode: UInt64, until: Int, then: @Sendable () -> Void)]>([])
    /// Events read from the queue, counted under this lock together with the read(2) that
    /// took them, so that a request measuring the queue with it held counts each event
    /// once or more, never not at all; and events handled (`draining` held).
    private let readCount = Mutex<Int>(0)
    private var handled = 0
    static let bufferSize = 64 * 1024
    private let buffer = UnsafeMutableRawPointer.allocate(byteCount: FanotifyWatcher.bufferSize, alignment: 8)
    /// Inode numbers of the handles seen (`draining` held); forgotten past `handleCacheLimit`.
    private var handles: [[UInt8]: UInt64] = [:]
    private static let handleCacheLimit = 65_536
    /// Events read, the daemon's own, outside changes of the store, and the rest of the
    /// file system (`draining` held); logged at stop.
    private var counts = (events: 0, own: 0, outside: 0, elsewhere: 0)

    /// How the store is marked.
    public enum Marking: String, Sendable {
        case fileSystem = "the file system of the store"
        case directories = "each directory of the store"
    }
    public let marking: Marking
    /// False once some directory could not be marked (the user's fanotify marks ran out,
    /// descriptors ran short): short cache timeouts from then on.
    private let complete = Atomic<Bool>(true)
    /// `.directories`: the first walk of the store, on a thread of its own so that the
    /// mount serves at once (with short cache timeouts until it ends).
    private let walked = Atomic<Bool>(true)
    public var isComplete: Bool { complete.load(ordering: .acquiring) && walked.load(ordering: .acquiring) }
    /// `.directories`: the directories marked, by inode, with the directory holding each
    /// and its name there (nil: `containers/`, `trash/`, `snapshots/`), for presenters'
    /// paths and to open a directory to mark what is made in it. An entry is made before
    /// the directory's mark, so that an event the mark reports finds it.
    private let marked = Mutex<[UInt64: (parent: UInt64, name: FilePath.Component?)]>([:])
    /// The three marked roots: their descriptors and their names in the store.
    private var roots: [UInt64: (fd: CInt, name: String)] = [:]
    /// Directories the daemon could not read to mark (`markingFailed`).
    private let unreadable = Mutex<Set<UInt64>>([])
    /// Directories made or moved into a marked one, to mark with what they hold: left to
    /// the watcher thread (a tree moved in may be large), and a request catching up waits
    /// for it (`catchUpHere`). `draining` held.
    private var unmarked: [(parent: UInt64, name: FilePath.Component, inode: UInt64?)] = []
    /// The queue overflowed: the store is to be walked again (`draining` held).
    private var rewalkDue = false
    private let debugEvents = getenv("CONTAINERFS_DEBUG_FANOTIFY") != nil
    /// The store is on ext2/3/4, whose file handles begin with the inode number.
    private let inodeLeadsHandle: Bool
    /// The marks count against the user's `max_user_marks` (a non-root daemon): a file's
    /// mark is removed when its item goes (`unwatchFile`).
    private let marksLimited: Bool
    public var kind: String { "fanotify" }
    public var summary: String { "fanotify (marking \(marking.rawValue), changes attributed by pid)" }

    /// Throws the errno of `fanotify_init` or `fanotify_mark` when fanotify cannot watch the
    /// store (a kernel before 5.17: EINVAL; fanotify disabled: EPERM or EMFILE; a file
    /// system without file handles: EOPNOTSUPP/ENODEV/EXDEV; the user's marks exhausted:
    /// ENOSPC), or EPERM for a non-root daemon on a file system whose handles do not begin
    /// with the inode number.
    public init(volume: Volume, listener: (any StoreChangeListener)? = nil,
                logger: Logger = Logger(label: "containerfs.watch")) throws(Errno) {
        self.volume = volume
        self.listener = listener
        self.logger = logger
        // What the init opened, closed again when it throws (the error is read first).
        var opened = [wakeFD]
        func refusing(_ error: Errno) -> Errno {
            for fd in opened { Glibc.close(fd) }
            return error
        }
        let isRoot = geteuid() == 0
        // Root in a user namespace may not have unlimited marks: then the user's limit.
        var fan = isRoot ? clinux_fanotify_init(1) : -1
        marksLimited = fan < 0
        if fan < 0 { fan = clinux_fanotify_init(0) }
        guard fan >= 0 else { throw refusing(Errno(rawValue: errno)) }
        opened.append(fan)
        self.fan = fan
        let tops = [(volume.store.containersFD, "containers"), (volume.store.trashFD, "trash"), (volume.store.snapshotsFD, "snapshots")]
        if isRoot && Self.isFileSystemRoot(volume.store.rootFD)
            && tops.allSatisfy({ clinux_fanotify_mark_filesystem(fan, $0.0) == 0 }) {
            marking = .fileSystem
        } else {
            marking = .directories
        }
        trashInode = (try? Syscall.fstat(volume.store.trashFD)).map { UInt64($0.st_ino) } ?? 0
        inodeLeadsHandle = clinux_fs_type(volume.store.containersFD) == 0xEF53
        // Without CAP_DAC_READ_SEARCH no handle can be opened: only inode numbers read from
        // the handles themselves name what changed.
        guard isRoot || inodeLeadsHandle else { throw refusing(.notPermitted) }
        // open_by_handle_at takes no O_PATH descriptor for its mount.
        mountFD = (try? Syscall.openat(volume.store.rootFD, ".", O_RDONLY | O_DIRECTORY)) ?? -1
        guard mountFD >= 0 else { throw refusing(Errno(rawValue: errno)) }
        opened.append(mountFD)
        guard marking == .directories else { return }
        for (fd, name) in tops {
            guard let st = try? Syscall.fstat(fd) else { continue }
            roots[UInt64(st.st_ino)] = (fd, name)
            marked.withLock { $0[UInt64(st.st_ino)] = (0, nil) }
            // The roots at once: a refusal (this user's marks exhausted, say) means no watcher.
            guard clinux_fanotify_mark_directory(fan, fd) == 0 else { throw refusing(Errno(rawValue: errno)) }
        }
        walked.store(false, ordering: .releasing)
        volume.items.everyFileWatched.store(volume.kernelCachesWrites, ordering: .releasing)
        volume.items.fileWatcher.withLock { $0 = self }
    }

    /// Whether `fd` is the root of a mounted file system (its parent is on another device).
    static func isFileSystemRoot(_ fd: CInt) -> Bool {
        guard let here = try? Syscall.fstat(fd), let up = try? Syscall.fstatat(fd, "..", 0) else { return false }
        return here.st_dev != up.st_dev
    }

    deinit { buffer.deallocate() }

    public func start() {
        started.store(true, ordering: .releasing)
        Threads.start(named: "cfs-fanotify") { [self] in
            loop()
            finished.signal()
        }
        guard !walked.load(ordering: .acquiring) else { return }
        Threads.start(named: "cfs-fanotify-walk") { [self] in
            let started = MonotonicClock.now()
            // Late: the mount serves meanwhile, and what the kernel caches of a directory
            // before its mark must go once it is marked.
            walkRoots(late: true)
            let count = marked.withLock { $0.count }
            walked.store(true, ordering: .releasing)
            logger.info("fanotify watcher: \(count) directories marked in \((MonotonicClock.now() - started) / 1_000_000) ms")
            walkFinished.signal()
        }
    }

    public func stop() {
        running.store(false, ordering: .releasing)
        volume.items.fileWatcher.withLock { $0 = nil }
        wake()
        if started.load(ordering: .acquiring) {
            finished.wait()
            if marking == .directories { walkFinished.wait() }
        }
        let c = draining.withLock { _ in counts }
        logger.info("fanotify watcher: \(c.events) events, \(c.own) the daemon's own, \(c.outside) outside changes of the store, \(c.elsewhere) elsewhere")
    }

    // MARK: - Thread and catching up

    private func loop() {
        var pollers = [pollfd(fd: fan, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
        var gather = Gathering()
        while running.load(ordering: .acquiring) {
            let ready = poll(&pollers, 2, -1)
            if ready <= 0 { continue }
            if pollers[1].revents != 0 { clearWake() }
            // Let a burst of events gather, so that one wake-up reads many, unless a request
            // is waiting for the news (its wake cuts the gathering short).
            if pollers[0].revents != 0, waiters.withLock({ $0.isEmpty }),
               clinux_wait_readable(wakeFD, gather.microseconds(now: MonotonicClock.now())) > 0 {
                clearWake()
            }
            // One read per hold of `draining`: requests waiting for a few events are let
            // go as soon as those are handled, not after a backlog of other programs' events.
            let released = draining.withLock { _ in
                let (events, outside) = (counts.events, counts.outside)
                let empty = drainOnce(inline: true)
                if counts.events > events { gather.finished(outside: counts.outside > outside, now: MonotonicClock.now()) }
                markNewDirectories()
                return waiters.withLock { w in
                    // Found empty with `draining` held: whatever any waiter asked for is handled.
                    let due = w.filter { empty || $0.until <= handled }
                    w.removeAll { empty || $0.until <= handled }
                    return due
                }
            }
            for w in released where !volume.afterObserversCaughtUp(with: w.inode, w.then) { w.then() }
        }
        for w in waiters.withLock({ w in defer { w.removeAll() }; return w }) { w.then() }
    }

    /// Drains here unless another thread is draining; false when one was.
    private func catchUpHere() -> Bool {
        draining.withLockIfAvailable { _ -> Bool in
            // Everything read is handled while `draining` is held.
            let until = handled + queuedEvents()
            while handled < until, !drainOnce(inline: false) {}
            // Requests waiting for what this handled are let go by the watcher thread, and
            // new directories are marked there.
            let done = unmarked.isEmpty && !rewalkDue
            if !done || waiters.withLock({ !$0.isEmpty }) { wake() }
            return done
        } ?? false
    }

    public func isCaughtUp(with inode: UInt64) -> Bool {
        catchUpHere() && !volume.observersHavePendingChanges(for: inode)
    }

    public func whenCaughtUp(with inode: UInt64, _ then: @escaping @Sendable () -> Void) {
        if catchUpHere() {
            if !volume.afterObserversCaughtUp(with: inode, then) { then() }
            return
        }
        let until = readCount.withLock { $0 + queuedEvents() }
        waiters.withLock { $0.append((inode, until, then)) }
        wake()
    }

    public func readQueue() { _ = catchUpHere() }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    private func clearWake() {
        var count: UInt64 = 0
        _ = Glibc.read(wakeFD, &count, 8)
    }

    // MARK: - Events

    /// How many events are queued now (FIONREAD counts a fanotify queue's events in
    /// metadata lengths, without their info records).
    private func queuedEvents() -> Int {
        clinux_bytes_queued(fan) / 24  // FAN_EVENT_METADATA_LEN
    }

    /// Reads the queue once and handles what was read; true when it was empty. `draining`
    /// held. `inline`: on the watcher thread (observers may act at once), else a request
    /// thread (they queue it). With the whole file system marked, other programs may keep
    /// the queue from ever emptying: a catch-up handles what was queued when it asked
    /// (FIONREAD), never "until empty".
    private func drainOnce(inline: Bool) -> Bool {
        var events: [clinux_fan_event] = []
        let n = readCount.withLock { count -> Int in
            var n = Glibc.read(fan, buffer, Self.bufferSize)
            while n < 0 && errno == EINTR { n = Glibc.read(fan, buffer, Self.bufferSize) }
            guard n > 0 else { return n }
            var offset = 0
            var event = clinux_fan_event()
            while true {
                let length = clinux_fanotify_parse(buffer, n, offset, &event)
                guard length > 0 else { break }
                events.append(event)
                offset += length
            }
            count += events.count
            return n
        }
        guard n > 0 else { return true }
        for event in events {
            handle(event, inline: inline)
            handled += 1
        }
        return false
    }

    private func handle(_ event: clinux_fan_event, inline: Bool) {
        counts.events += 1
        if event.mask & clinux_FAN_Q_OVERFLOW != 0 {
            logger.warning("fanotify queue overflowed; every item the kernel holds is invalidated")
            everythingChanged()
            if marking == .directories { followDirectories(event) }
            return
        }
        if marking == .directories { followDirectories(event) }
        if event.pid == ownPID {
            counts.own += 1
            return
        }
        var inStore = false
        // The directory of the entry (or of the object the event is about), if the kernel
        // holds it: only then can it cache anything under it.
        let dirInode = heldDirectory(event.dir)
        let wanted = listener?.wantsStoreChanges == true
        // Made only when used: most events of a busy store are of directories the kernel
        // does not hold.
        let name = dirInode != nil || wanted || debugEvents ? event.name.flatMap { FilePath.Component(platformString: $0) } : nil
        // The entry: made or removed.
        if event.mask & (clinux_FAN_CREATE | clinux_FAN_DELETE) != 0, let dirInode, let name {
            inStore = true
            entryChanged(dirInode, name, appeared: event.mask & clinux_FAN_CREATE != 0, inline: inline)
        }
        // A name made for or taken from a file the kernel holds (a hard link), in any
        // directory: its link count changed. The link count's own event reaches only a mark
        // of the file itself or of its file system, not its directory's.
        if event.mask & (clinux_FAN_CREATE | clinux_FAN_DELETE) != 0, event.mask & clinux_FAN_ONDIR == 0,
           let object = event.object.flatMap({ inode(of: $0) }), let item = volume.item(object) {
            inStore = true
            itemChanged(object, item, knownAs: item.placement, inline: inline)
        }
        // Presenters hear of every change in the store, held by the kernel or not.
        if wanted, event.mask & (clinux_FAN_CREATE | clinux_FAN_DELETE) != 0, let path = presenterPath(event.dir, name) {
            listener?.storeChanged(event.mask & clinux_FAN_CREATE != 0 ? .appeared(path) : .deleted(path))
        }
        // Moved: both names in one event (a move into or out of what the kernel holds is
        // only a creation or a deletion for it).
        if event.mask & clinux_FAN_RENAME != 0 {
            let fromDir = heldDirectory(event.old_dir), toDir = heldDirectory(event.new_dir)
            let fromName = event.old_name.flatMap { FilePath.Component(platformString: $0) }
            let toName = event.new_name.flatMap { FilePath.Component(platformString: $0) }
            let from = wanted ? presenterPath(event.old_dir, fromName) : nil
            let to = wanted ? presenterPath(event.new_dir, toName) : nil
            if let fromDir, let fromName {
                inStore = true
                entryChanged(fromDir, fromName, appeared: false, inline: inline)
            }
            if let toDir, let toName {
                inStore = true
                entryChanged(toDir, toName, appeared: true, inline: inline)
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
        // A directory's own event names it as the directory, with the name "." and no
        // object record (the same handle), and must still count as the directory's change.
        let isSelf = event.object == nil && event.name.map { $0[0] == 0x2E && $0[1] == 0 } != false
        if event.mask & (clinux_FAN_ATTRIB | clinux_FAN_CLOSE_WRITE | clinux_FAN_MODIFY) != 0,
           let object = event.object ?? (isSelf ? event.dir : nil), let objectInode = inode(of: object) {
            let item = volume.item(objectInode)
            if item != nil || (dirInode != nil && !isSelf) {
                inStore = true
                let known = item?.placement ?? name.flatMap { n in dirInode.map { ($0 == trashInode ? Volume.rootInode : $0, n) } }
                itemChanged(objectInode, item, knownAs: known, inline: inline)
            }
        }
        if wanted, !isSelf, event.mask & (clinux_FAN_ATTRIB | clinux_FAN_CLOSE_WRITE) != 0, let path = presenterPath(event.dir, name) {
            listener?.storeChanged(.changed(path))
        }
        if inStore { counts.outside += 1 } else { counts.elsewhere += 1 }
        if debugEvents {
            let d = event.dir.flatMap { inode(of: $0) }, o = event.object.flatMap { inode(of: $0) }
            logger.info("fanotify event mask \(String(event.mask, radix: 16)) pid \(event.pid) dir \(d.map(String.init) ?? "-") name \(name.map { String(describing: $0) } ?? "-") object \(o.map(String.init) ?? "-") inStore \(inStore)")
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

    /// The item changed outside the mount: the kernel's caches of it go. Under writeback
    /// the kernel keeps a file's size and times itself: it is made to let go of the inode.
    private func itemChanged(_ inode: UInt64, _ item: Item?,
                             knownAs entry: (parent: UInt64, name: FilePath.Component)?, inline: Bool) {
        volume.outsideItemChanges.note(inode)  // before the table is asked again: see there
        volume.forgetCachedAttributes(inode)
        let item = item ?? volume.item(inode)
        let held = volume.kernelCachesWrites && item?.isRegularFile == true ? item : nil
        if let held { volume.markChangedOutside(held) }
        tellItemChanged(inode, inline: inline, noted: true)
        if held != nil, let (parent, name) = entry { volume.dropOldInode(parent: parent, name: name) }
    }

    private func tellItemChanged(_ inode: UInt64, inline: Bool, noted: Bool = false) {
        if !noted { volume.outsideItemChanges.note(inode) }
        if inline { volume.notify { $0.itemChangedOutside(inode) } } else { volume.notify { $0.itemChanged(inode) } }
    }

    /// After an overflow: every item the kernel holds is invalidated.
    private func everythingChanged() {
        volume.outsideItemChanges.noteEverything()
        volume.items.outsideEntryEpoch.add(1, ordering: .releasing)
        volume.notify { $0.resync() }
        for inode in volume.items.allInodes() {
            let item = volume.item(inode)
            itemChanged(inode, item, knownAs: item?.placement, inline: false)
        }
        listener?.storeChanged(.resync(nil))
    }

    /// The inode number of the object a file handle names (nil: gone, or not openable);
    /// remembered, since the handles of a file system name one inode for good.
    private func inode(of handle: UnsafeRawPointer) -> UInt64? {
        let bytes = Int(handle.loadUnaligned(as: UInt32.self))
        // ext2/3/4 (FILEID_INO32_GEN, _PARENT): the inode number leads the handle. No system
        // call for the other programs' events the whole-file-system mark brings.
        if inodeLeadsHandle, bytes >= 8, (1...2).contains(handle.loadUnaligned(fromByteOffset: 4, as: Int32.self)) {
            return UInt64(handle.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        }
        let size = 8 + bytes
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

    /// The mount path of `name` in the directory a handle names, for presenters; nil
    /// outside `containers/`, `snapshots/` and `trash/`. With the whole file system marked,
    /// a look-up by handle per event while presenters listen, of other programs' events too.
    private func presenterPath(_ handle: UnsafeRawPointer?, _ name: FilePath.Component?) -> FilePath? {
        guard let handle, let name, let directory = storePath(handle) else { return nil }
        switch directory.components.first?.string {
        case "containers", "snapshots": return directory.appending(name)
        case "trash": return FilePath(root: "/", directory.components.dropFirst()).appending(name)
        default: return nil
        }
    }

    /// The path in the store (`/containers/…`) of the directory a handle names.
    private func storePath(_ handle: UnsafeRawPointer) -> FilePath? {
        if marking == .directories {
            guard let inode = inode(of: handle), let (root, components) = markedPath(inode) else { return nil }
            return FilePath(root: "/", [FilePath.Component(root.name)!] + components)
        }
        let fd = clinux_open_handle(mountFD, handle)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)") else { return nil }
        var path = FilePath(target)
        guard path.removePrefix(volume.store.resolvedPath) else { return nil }
        path.root = "/"
        return path
    }

    // MARK: - Marking each directory

    /// Where a marked directory is: its root and the names below it; nil if it is not
    /// marked (or no longer in the store).
    private func markedPath(_ inode: UInt64) -> (root: (fd: CInt, name: String), components: [FilePath.Component])? {
        var components: [FilePath.Component] = []
        var current = inode
        return marked.withLock { marked in
            while let entry = marked[current] {
                guard let name = entry.name else { return roots[current].map { ($0, components.reversed()) } }
                components.append(name)
                current = entry.parent
                if components.count > 4096 { return nil }  // a cycle: never, but never loop
            }
            return nil
        }
    }

    /// Opens a marked directory (`O_PATH`), one name at a time and following no link.
    private func openMarked(_ inode: UInt64) -> CInt? {
        guard let (root, components) = markedPath(inode) else { return nil }
        var fd = (try? Syscall.openat(root.fd, ".", O_PATH | O_DIRECTORY)) ?? -1
        for component in components where fd >= 0 {
            let next = component.withPlatformString { (try? Syscall.openat(fd, $0, O_PATH | O_DIRECTORY | O_NOFOLLOW)) ?? -1 }
            Syscall.close(fd)
            fd = next
        }
        return fd >= 0 ? fd : nil
    }

    /// Some directory of the store goes unmarked from now on: short cache timeouts.
    private func giveUpCompleteness(_ why: String) {
        if complete.exchange(false, ordering: .acquiringAndReleasing) { logger.warning("\(why); using short cache timeouts") }
    }

    /// Marks the directory behind `fd` (an `O_PATH` descriptor, taken over) and every
    /// directory below it. `late`: it was made or moved in before its mark, so whatever
    /// happened in it meanwhile went unheard; if the kernel holds it, its entries are due
    /// for a look-up again, and every item for a check of its name at its next OPEN.
    private func markTree(_ fd: CInt, _ inode: UInt64, late: Bool) {
        defer { Syscall.close(fd) }
        guard running.load(ordering: .relaxed) else { return }
        guard clinux_fanotify_mark_directory(fan, fd) == 0 else {
            markingFailed(Errno(rawValue: errno), inode, "mark")
            return
        }
        let stream: DirectoryStream
        do { stream = try opening { () throws(Errno) in try DirectoryStream.open(fd) } } catch {
            markingFailed(error, inode, "list")
            return
        }
        let heldLate = late && volume.item(inode) != nil
        if heldLate { volume.items.outsideEntryEpoch.add(1, ordering: .releasing) }
        while let entry = try? stream.next() {
            guard !entry.isDotOrDotDot else { continue }
            // A hard link made here before the mark changed the link count of a file the
            // kernel may hold elsewhere.
            if late, entry.type != UInt8(DT_DIR), let item = volume.item(entry.inode) {
                itemChanged(entry.inode, item, knownAs: item.placement, inline: true)
            }
            let isDirectory = entry.type == UInt8(DT_DIR) || entry.type == UInt8(DT_UNKNOWN)
            guard heldLate || isDirectory, let name = FilePath.Component(platformString: entry.name) else { continue }
            if heldLate { volume.notify { $0.entryMayHaveAppeared(parent: inode, name: name) } }
            guard isDirectory, running.load(ordering: .relaxed) else { continue }
            let child: CInt
            do { child = try opening { () throws(Errno) in try Syscall.openat(fd, entry.name, O_PATH | O_DIRECTORY | O_NOFOLLOW) } } catch {
                markingFailed(error, entry.inode, "open")
                continue
            }
            guard let st = try? Syscall.fstat(child) else { Syscall.close(child); continue }
            // A directory not marked before (made while events were lost) is late too.
            let known = marked.withLock { m in
                defer { m[UInt64(st.st_ino)] = (inode, name) }
                return m[UInt64(st.st_ino)] != nil
            }
            markTree(child, UInt64(st.st_ino), late: late || !known)
        }
    }

    /// Runs `body`, which opens a descriptor, shedding and waiting (up to a second) while
    /// descriptors run short (DESIGN.md 28): a walk beside a busy mount must not give up
    /// long timeouts over a shortage that passes.
    private func opening<R>(_ body: () throws(Errno) -> R) throws(Errno) -> R {
        var tries = 0
        while true {
            do { return try volume.sheddingOnShortage(body) } catch {
                guard Volume.isDescriptorShortage(error), tries < 50 else { throw error }
                tries += 1
                usleep(20_000)
            }
        }
    }

    /// A directory could not be marked, listed or opened. Gone: nothing to do. Not readable
    /// by the daemon (a non-root daemon, `chmod 000`): the kernel can cache nothing the
    /// daemon cannot look up there; it is marked when its mode changes (`followDirectories`).
    /// Anything else (descriptors or marks ran out) leaves part of the store unheard.
    private func markingFailed(_ error: Errno, _ inode: UInt64, _ what: String) {
        switch error {
        case .noSuchFileOrDirectory, .notDirectory: return
        case .permissionDenied: unreadable.withLock { _ = $0.insert(inode) }
        default: giveUpCompleteness("cannot \(what) every directory of the store (\(error))")
        }
    }

    func watchFile(_ item: Item) {
        _ = try? Syscall.withProcPath(item.fd) { path throws(Errno) in clinux_fanotify_mark_file(fan, path) }
    }

    /// An evictable mark goes only with its inode, which a file's other names or the
    /// dentry cache may keep long after the kernel forgot the item: while it lasts, it
    /// counts against a non-root daemon's marks.
    func unwatchFile(_ item: Item) {
        guard marksLimited else { return }
        _ = try? Syscall.withProcPath(item.fd) { path throws(Errno) in clinux_fanotify_unmark_file(fan, path) }
    }

    /// Keeps `marked` in step with directories made, removed and moved, the daemon's own
    /// included; directories made or moved in are left to `markNewDirectories`.
    private func followDirectories(_ event: clinux_fan_event) {
        if event.mask & clinux_FAN_Q_OVERFLOW != 0 {
            // Directories made meanwhile went unheard: the whole store is walked again
            // (marked directories cost nothing more).
            rewalkDue = true
            return
        }
        guard event.mask & clinux_FAN_ONDIR != 0 else { return }
        let object = event.object.flatMap { inode(of: $0) }
        if event.mask & clinux_FAN_ATTRIB != 0, let object, unreadable.withLock({ $0.remove(object) != nil }),
           let (parent, name) = marked.withLock({ $0[object] }), let name {
            unmarked.append((parent, name, object))
        }
        if event.mask & clinux_FAN_CREATE != 0, let dir = event.dir.flatMap({ inode(of: $0) }),
           marked.withLock({ $0[dir] != nil }), let name = event.name.flatMap({ FilePath.Component(platformString: $0) }) {
            unmarked.append((dir, name, object))
        }
        if event.mask & clinux_FAN_DELETE != 0, let object { _ = marked.withLock { $0.removeValue(forKey: object) } }
        if event.mask & clinux_FAN_RENAME != 0, let object {
            let to = event.new_dir.flatMap { inode(of: $0) }
            let name = event.new_name.flatMap { FilePath.Component(platformString: $0) }
            // Moved within the store or into it: walked (again), since directories made in it
            // meanwhile may have been lost with the path they were made under.
            _ = marked.withLock { $0.removeValue(forKey: object) }
            if let to, let name, marked.withLock({ $0[to] != nil }) { unmarked.append((to, name, object)) }
        }
    }

    /// Marks every directory of the store (`markTree` from each root).
    private func walkRoots(late: Bool) {
        for (inode, root) in roots where running.load(ordering: .acquiring) {
            if let fd = try? Syscall.openat(root.fd, ".", O_PATH | O_DIRECTORY) { markTree(fd, inode, late: late) }
        }
    }

    /// Marks the directories `followDirectories` found made or moved in, with everything
    /// below them; `draining` held, on the watcher thread.
    private func markNewDirectories() {
        if rewalkDue {
            rewalkDue = false
            // An overflow invalidated everything already; directories not marked before are late.
            walkRoots(late: false)
        }
        while !unmarked.isEmpty {
            let (parent, name, inode) = unmarked.removeFirst()
            guard let dirFD = openMarked(parent) else { continue }
            let fd = name.withPlatformString { (try? Syscall.openat(dirFD, $0, O_PATH | O_DIRECTORY | O_NOFOLLOW)) ?? -1 }
            Syscall.close(dirFD)
            guard fd >= 0 else { continue }
            guard let st = try? Syscall.fstat(fd) else { Syscall.close(fd); continue }
            // Moved on or replaced since: a later event tells of what is there now.
            guard inode == nil || inode == UInt64(st.st_ino) else { Syscall.close(fd); continue }
            marked.withLock { $0[UInt64(st.st_ino)] = (parent, name) }
            markTree(fd, UInt64(st.st_ino), late: true)
        }
    }
}

/// How long the watcher lets events gather after a wake-up before it reads them. Every
/// change the daemon makes comes back as an event (dropped by pid, but read): a
/// metadata-heavy workload through the mount would wake the watcher once per change, a
/// context switch each on cores busy with the workload and the FUSE workers. The latency
/// traded is that of *outside* changes reaching the kernel's caches (an OPEN catches up at
/// once, decision 27), so it stays short unless the watcher is plainly in a stream of its
/// own echoes: 100 µs normally; 1 ms while the previous batch held only the daemon's own
/// events and the next began within 500 µs of it.
struct Gathering {
    static let normal: UInt32 = 100
    static let streaming: UInt32 = 1_000
    /// Nanoseconds between batches that still count as one stream.
    static let streamGap: UInt64 = 500_000

    private var lastBatchEnd: UInt64 = 0
    private var lastBatchWasOwn = false

    /// The gathering time for a wake-up at `now` (monotonic nanoseconds).
    func microseconds(now: UInt64) -> UInt32 {
        lastBatchWasOwn && now &- lastBatchEnd < Self.streamGap ? Self.streaming : Self.normal
    }

    /// A batch was handled; `outside`: it held a change made outside the mount.
    mutating func finished(outside: Bool, now: UInt64) {
        lastBatchWasOwn = !outside
        lastBatchEnd = now
    }
}
