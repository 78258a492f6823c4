import CLinux
import Dispatch
import Foundation
import Glibc
import Logging
import Synchronization
import SystemPackage

/// Watches the backing store with inotify, so that changes made there directly, bypassing
/// the mount, reach the volume's observers: the kernel's caches are invalidated (the mount
/// shows the new bytes and entries at once despite long cache timeouts) and, later,
/// presenters hear of them as uncoordinated changes. docs/SEMANTICS.md §3.7.
///
/// One watch per directory of `containers/`, `trash/` and `snapshots/`. Watched: entries
/// appearing, vanishing and moving, attribute changes, and writes *at close*
/// (IN_CLOSE_WRITE): per-write events (IN_MODIFY) would cost the watcher a wake-up per
/// write(2) of every program, and every editor closes what it saved. A writer that keeps a
/// file open (or writes through a shared mmap) is seen when it closes, and before that by
/// each open through the mount, which compares the content (`Volume.pagesPredateContent`).
///
/// The daemon's own changes echo back; `OwnChanges` recognises them.
/// Queue overflow (IN_Q_OVERFLOW) triggers a rescan and `resync`; directories that cannot
/// be watched (watch limit) make the watcher `incomplete`, which the mount answers with
/// short cache timeouts instead of long ones: never silence. Later a rescan tries again to
/// watch every directory (after a quarter of the watches are gone, if there were too many
/// directories; 1 s after giving up, then less and less often), and if it can, the watcher
/// is complete again: a burst of directories does not slow the mount for good.
///
/// A request that must see every change made before it (an OPEN) first catches up with
/// the queue (`isCaughtUp`, `whenCaughtUp`): inotify queues an event before the change's
/// system call returns, so whoever reads the queue to its end knows of every earlier change.
///
/// Sendable note: `watches`, `movedFrom` and `buffer` are touched only with `draining` held
/// after `start()`; before, only by `init` (single-threaded).
public final class StoreWatcher: @unchecked Sendable {
    struct Watched {
        let fd: CInt      // O_PATH descriptor of the directory
        let inode: UInt64
        /// The watch of the directory holding this one, and the name it has there: an
        /// O_PATH descriptor keeps a removed directory alive, so inotify never says
        /// IN_IGNORED; the parent's IN_DELETE is what ends the watch.
        var parent: CInt
        var name: FilePath.Component?
        /// When the watch began (`OwnChanges.now()`, read after `inotify_add_watch`): the
        /// daemon's changes here begun before it may have queued no echo
        /// (`OwnChanges.entryEcho`).
        let since: UInt64
    }

    private let volume: Volume
    private let inotify: CInt
    private var watches: [CInt: Watched] = [:]
    private let logger: Logger
    private let running = Atomic<Bool>(true)
    /// False while some directory could not be watched.
    public let complete = Atomic<Bool>(true)
    /// While incomplete: when a rescan tries again to watch every directory (after a
    /// quarter of the watches end, if there were too many; backing off from 1 s to 10 min).
    private var retry = CompletenessRetry()
    /// A try is due (set with `draining` held, done by the watcher thread in `doWorkLeft`).
    private var retryNow = false
    /// How often the watcher gave up; a rescan that adds none sees every directory.
    private var giveUps = 0
    /// How many directories may be watched (`refreshBudget`).
    private var budget = 1024
    /// Half the inotify watches a user may have (fs.inotify.max_user_watches): the rest
    /// stays for the other programs of the daemon's user.
    private let watchLimit: Int = {
        guard let text = try? String(contentsOfFile: "/proc/sys/fs/inotify/max_user_watches", encoding: .utf8),
              let n = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return Int.max }
        return max(1024, n / 2)
    }()
    /// `STORE/trash`: its entries (`.Trash-UID`) sit at the mount root, node 1.
    private var trashInode: UInt64 = 0
    /// Told of each outside change by path, when it wants to be (presenters exist).
    private let listener: (any StoreChangeListener)?

    static let mask: UInt32 = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB)
        | UInt32(IN_ONLYDIR) | UInt32(IN_EXCL_UNLINK)  // no IN_DONT_FOLLOW: the path is our own /proc link to a directory descriptor

    public init(volume: Volume, listener: (any StoreChangeListener)? = nil, logger: Logger = Logger(label: "containerfs.watch")) throws {
        self.volume = volume
        self.listener = listener
        self.logger = logger
        inotify = clinux_inotify_init()
        guard inotify >= 0 else { throw FileManagerError.system(Errno(rawValue: errno), "inotify") }
        trashInode = (try? Syscall.fstat(volume.store.trashFD)).map { UInt64($0.st_ino) } ?? 0
        refreshBudget()
        watchStore()
        cursor.descriptor.store(inotify, ordering: .releasing)
        volume.items.fileWatches.descriptor.store(inotify, ordering: .releasing)
        volume.ownChanges.enabled.store(true, ordering: .releasing)
    }

    private let started = Atomic<Bool>(false)
    /// An eventfd in the poll set, so that `stop` wakes the thread at once.
    private let wakeFD: CInt = clinux_eventfd()
    private let finished = DispatchSemaphore(value: 0)

    public func start() {
        started.store(true, ordering: .releasing)
        Threads.start(named: "cfs-watch") { [self] in
            loop()
            finished.signal()
        }
    }

    /// Stops the thread (woken through `wakeFD`) and waits for it.
    public func stop() {
        running.store(false, ordering: .releasing)
        wake()
        if started.load(ordering: .acquiring) { finished.wait() }
    }

    public var watchCount: Int { draining.withLock { _ in watches.count } }

    // MARK: - Watches

    /// Watches (again, after an overflow: existing watches are kept) every directory of
    /// `containers/`, `trash/` and `snapshots/`.
    private func watchStore() {
        for fd in [volume.store.containersFD, volume.store.trashFD, volume.store.snapshotsFD] {
            watchTree(duplicate(fd), parent: -1, name: nil)
        }
    }

    private func duplicate(_ fd: CInt) -> CInt {
        openToWatch(fd, ".") ?? -1
    }

    /// Opens a directory of the store to watch it. A failure other than the directory having
    /// gone (out of descriptors: DESIGN.md 28) leaves part of the store unseen, so the mount
    /// stops trusting its caches.
    private func openToWatch(_ dir: CInt, _ name: UnsafePointer<CChar>) -> CInt? {
        do {
            return try Syscall.openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW)
        } catch {
            if error != .noSuchFileOrDirectory && error != .notDirectory {
                giveUpCompleteness("cannot open a directory of the store to watch it (\(error))")
            }
            return nil
        }
    }

    /// How many directories may be watched: each holds a descriptor, so at most a quarter of
    /// the descriptor limit (1,024 at least, never more than half), leaving the rest to the
    /// items the kernel holds, and at most `watchLimit`; past that, short timeouts. Asked
    /// again wherever watches are added (a walk, a new directory): the limit can change under
    /// a running daemon (prlimit).
    private func refreshBudget() {
        budget = WatchBudget.directories(descriptorLimit: Syscall.descriptorLimit(), watchLimit: watchLimit)
    }

    /// Some directory of the store goes unwatched from now on: short cache timeouts. With
    /// `untilFewerWatches` (too many directories) the next try waits for a quarter of the
    /// watches to end too; other causes (descriptors, the inotify limit) end elsewhere.
    private func giveUpCompleteness(_ why: String, untilFewerWatches: Bool = false) {
        giveUps += 1
        let firstTime = complete.exchange(false, ordering: .acquiringAndReleasing)
        if firstTime { logger.warning("\(why); using short cache timeouts") }
        retry.gaveUp(watchCount: watches.count, untilFewerWatches: untilFewerWatches, firstTime: firstTime, now: OwnChanges.now())
    }

    /// While incomplete, whether a try to watch every directory is due now, or when it will
    /// be: 0 due (and left to the watcher thread), nil none coming, else nanoseconds to wait.
    /// Called with `draining` held: after events, a watch ending, or the retry timer.
    @discardableResult
    private func considerRetry() -> UInt64? {
        guard let wait = retry.due(watchCount: watches.count, now: OwnChanges.now()) else { return nil }
        if wait == 0 {
            retryNow = true
            leaveWork()
        }
        return wait
    }

    /// Watches the directory behind `fd` (taken over) and every directory below it.
    private func watchTree(_ fd: CInt, parent: CInt, name: FilePath.Component?) {
        guard fd >= 0 else { return }
        guard let st = try? Syscall.fstat(fd) else { Syscall.close(fd); return }
        // Watched first, counted after: a directory already watched (inotify answers its
        // watch) costs nothing more, so a rescan at the budget still walks the whole store.
        let wd = (try? Syscall.withProcPath(fd) { path throws(Errno) in clinux_inotify_add_watch(inotify, path, Self.mask) }) ?? -1
        // Read once the watch is in place: a change begun before may have had no echo on it
        // (one whose echo does come is then reported as uncertain: `OwnChanges.entryEcho`).
        let since = OwnChanges.now()
        if wd < 0 {
            giveUpCompleteness("cannot watch every directory of the store (\(Errno(rawValue: errno)))")
            Syscall.close(fd)
            return
        }
        if watches[wd] == nil && watches.count >= budget {
            _ = clinux_inotify_rm_watch(inotify, wd)
            giveUpCompleteness("more than \(budget) directories in the store", untilFewerWatches: true)
            Syscall.close(fd)
            return
        }
        let isNew = watches[wd] == nil
        if !isNew {
            // Already watched (a rescan, or a directory moved): keep the descriptor, follow the move.
            Syscall.close(fd)
            if parent >= 0 { watches[wd]!.parent = parent; watches[wd]!.name = name }
        } else {
            watches[wd] = Watched(fd: fd, inode: UInt64(st.st_ino), parent: parent, name: name, since: since)
        }
        let dirFD = watches[wd]!.fd
        let stream: DirectoryStream
        do { stream = try DirectoryStream.open(dirFD) } catch {
            if error != .noSuchFileOrDirectory { giveUpCompleteness("cannot list a directory of the store (\(error))") }
            return
        }
        // A directory the kernel holds, watched only now (made through the mount or in the
        // store, and the watcher reads of it later): what happened in it before went unheard.
        // Its entries expire in the kernel, which looks each up again at its next use, and
        // every item is due for a check of its name at its next OPEN (`wasReplacedInStore`):
        // a name the kernel holds may have gone. So for every directory below it too: a
        // file the mount made in a new directory, moved away and replaced in the store
        // before the watcher read of the directory's parent, kept the old file under its
        // name for good (a loop after a coherence fuzzer's s29a-def-2901: 1 round in 5-20).
        let inode = UInt64(st.st_ino)
        let heldUnwatched = isNew && volume.item(inode) != nil
        if heldUnwatched { volume.items.outsideEntryEpoch.add(1, ordering: .releasing) }
        let meetsExpectations = isNew && volume.ownChanges.expectsEntries
        while let entry = try? stream.next() {
            guard !entry.isDotOrDotDot else { continue }
            let child = heldUnwatched || meetsExpectations ? FilePath.Component(platformString: entry.name) : nil
            if heldUnwatched, let child {
                volume.notify { $0.entryMayHaveAppeared(parent: inode, name: child) }
            }
            // What a directory held when its watch began may have been made without an echo:
            // the daemon's expectations of it begun before the watch go, or they would take
            // the next outside change of the name (a rename, a delete) for its own for a
            // second (`mkdir -p a/b; echo >a/b/f` through the mount, then `mv` in the store),
            // also once a later change of the daemon's own to the name, which does echo,
            // joined them (so that not every one of its changes began before the watch:
            // `OwnChanges.entryEcho`). Those begun after it stay for their echoes
            // (`OwnChanges.metBeforeWatch`).
            if meetsExpectations, let child { volume.ownChanges.metBeforeWatch(inode, child, watchedSince: since) }
            guard entry.type == UInt8(DT_DIR) else { continue }
            if let child = openToWatch(dirFD, entry.name) {
                watchTree(child, parent: wd, name: FilePath.Component(platformString: entry.name))
            }
        }
    }

    // MARK: - Events

    static let bufferSize = 64 * 1024
    /// The inotify read buffer; used with `draining` held.
    private let buffer = UnsafeMutableRawPointer.allocate(byteCount: StoreWatcher.bufferSize, alignment: 8)
    /// Held by whoever reads and handles events: the watcher thread, or a request handler
    /// catching up (`catchUp`). Guards `watches`, `movedFrom` and `buffer` after `start()`.
    private let draining = Mutex<Void>(())
    /// Requests that found the queue being read by another thread (or work left to the
    /// watcher thread). Each waits for news of one item, and for the queue to have been
    /// handled up to `until` (a position in `cursor.handledBytes`): everything queued when it
    /// asked. Under a storm of outside changes the queue never empties; the position is
    /// what keeps such a request from waiting for changes made after it.
    private let waiters = Mutex<[(inode: UInt64, until: UInt64, then: @Sendable () -> Void)]>([])
    /// Where the queue stands (bytes of events queued and read); shared with `OwnChanges`.
    private var cursor: QueueCursor { volume.ownChanges.cursor }
    /// Work too heavy for a request thread, left to the watcher thread (`draining` held):
    /// a rescan after an overflow, and new directories to watch (by parent watch and name).
    private var rescanDue = false
    private var newDirectories: [(parent: CInt, name: FilePath.Component)] = []
    /// Set with the above, so that a wake-up with no event still does the work.
    private let workLeft = Atomic<Bool>(false)

    deinit { buffer.deallocate() }

    private func loop() {
        var pollers = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
        var gather = WatchGather()
        // No timeout but the retry timer (while incomplete): everything else that gives this
        // thread work (a change, a waiting request, work left, stop) makes `wakeFD` or the
        // queue readable, so an idle store wakes nobody.
        var timeout = draining.withLock { _ in Self.pollTimeout(considerRetry()) }
        while running.load(ordering: .acquiring) {
            let ready = poll(&pollers, 2, timeout)
            if ready < 0 { continue }
            if ready == 0 {
                timeout = draining.withLock { _ in
                    let wait = considerRetry()
                    doWorkLeft()
                    return Self.pollTimeout(wait == 0 ? considerRetry() : wait)
                }
                continue
            }
            if pollers[1].revents != 0 { clearWake() }
            let waiting = waiters.withLock { !$0.isEmpty } || workLeft.load(ordering: .acquiring)
            if pollers[0].revents == 0 && !waiting { continue }
            // Let a burst of events gather, so one wake-up reads many (WatchGather), unless
            // a request is waiting for the news (a wake cuts the gathering short).
            let wait = waiting ? 0 : gather.microseconds(now: OwnChanges.now())
            if wait > 0 && sleepUnlessWoken(microseconds: wait) { clearWake() }
            let released = draining.withLock { _ -> [(inode: UInt64, until: UInt64, then: @Sendable () -> Void)] in
                doWorkLeft()
                let batch = drain(inline: true)
                if batch.events > 0 { gather.finished(outside: batch.outside, now: OwnChanges.now()) }
                timeout = Self.pollTimeout(considerRetry())
                // A waiter's `until` can overshoot (`QueueCursor.position` adds a read's worth
                // when it keeps finding a read under way); a queue found empty while
                // `draining` is held means everything queued before any waiter asked has
                // been handled. Looked at under the waiters' lock, so "any waiter" is every
                // one there: a request that asked after a look at a queue still empty (the
                // store not yet changed), while this thread was preempted before taking the
                // lock, was let go without the news of changes made before it asked (an
                // OPEN served a file the store had replaced and renamed away:
                // `open-after-outside-edit`'s replaced-moved rounds, 1-4 in 300 in some runs).
                return waiters.withLock { w in
                    guard !w.isEmpty else { return [] }
                    let handled = clinux_bytes_queued(inotify) == 0 ? UInt64.max : cursor.handledBytes.load(ordering: .acquiring)
                    let due = w.filter { $0.until <= handled }
                    w.removeAll { $0.until <= handled }
                    return due
                }
            }
            for w in released where !volume.afterObserversCaughtUp(with: w.inode, w.then) { w.then() }
        }
        // Stopping: requests still waiting are answered now, before the session goes.
        for w in waiters.withLock({ w in defer { w.removeAll() }; return w }) { w.then() }
    }

    /// Milliseconds for poll(2) until a retry `considerRetry` said is coming (-1: none).
    private static func pollTimeout(_ nanoseconds: UInt64?) -> CInt {
        guard let nanoseconds else { return -1 }
        return CInt(min(nanoseconds / 1_000_000 + 1, 600_000))
    }

    /// The work request threads left; `draining` held, on the watcher thread.
    private func doWorkLeft() {
        guard workLeft.exchange(false, ordering: .acquiringAndReleasing) else { return }
        if rescanDue || retryNow {
            newDirectories.removeAll()  // the rescan watches them
            rescan(afterOverflow: rescanDue)
            rescanDue = false
            retryNow = false
        }
        for (parent, name) in newDirectories {
            if let dir = watches[parent] { watchNewDirectory(dir, name) }
        }
        newDirectories.removeAll()
    }

    /// Reads and handles queued events, at most `limit` bytes of them (what was queued when
    /// a request asked; nil: until the queue is empty); `draining` held. `inline`: on the
    /// watcher thread, where observers may act at once (`entryChangedOutside`); a request
    /// handler must not (libfuse: a notification may wait on the kernel, which may wait on
    /// a request), so there the observers queue it.
    private func drain(inline: Bool, limit: Int? = nil) -> (events: Int, outside: Bool) {
        var events = 0
        var outside = false
        var left = limit ?? Int.max
        while left > 0 {
            let (start, n) = cursor.read(into: buffer, count: min(Self.bufferSize, left))
            if n <= 0 { break }
            left -= n
            var offset = 0
            while offset < n {
                let event = (buffer + offset).assumingMemoryBound(to: clinux_inotify_event.self)
                let length = Int(event.pointee.len)
                let name: FilePath.Component? = length > 0
                    ? FilePath.Component(platformString: UnsafeRawPointer(buffer + offset + 16).assumingMemoryBound(to: CChar.self))
                    : nil
                if handle(wd: event.pointee.wd, mask: event.pointee.mask, cookie: event.pointee.cookie, name: name,
                          queuedAt: start + UInt64(offset), endsAt: start + UInt64(offset + 16 + length), inline: inline) {
                    outside = true
                }
                if length > 0, event.pointee.mask & UInt32(IN_ISDIR) != 0,
                   event.pointee.mask & UInt32(IN_DELETE) != 0, let name { unwatch(parent: event.pointee.wd, name: name, inline: inline) }
                offset += 16 + length
                events += 1
            }
            cursor.handledBytes.add(UInt64(n), ordering: .releasing)  // `draining` held
            // Room left for the longest event (16 bytes and a 255-byte name): the queue was empty.
            if n + 16 + 256 <= Self.bufferSize { break }
        }
        // A move out of the store (or whose other half was lost) is a deletion.
        for (_, from) in movedFrom { listener?.storeChanged(.deleted(from)) }
        movedFrom.removeAll()
        if linkCountsDue {
            linkCountsDue = false
            for (inode, fell) in volume.items.linkCounts.changed(in: volume.items) {
                if let item = volume.items.item(inode) {
                    // A writer that opened the file by the name that went closes unheard by
                    // any directory: the file is watched itself, before the kernel is told
                    // (what was written before is dropped with it).
                    if fell { volume.items.watchFile(item) }
                    // Under writeback the removed name may have taken the only news of an
                    // edit with it (its close read after the unlink: the name led nowhere),
                    // and the kernel keeps its own size for the file's other names
                    // (DESIGN.md 22).
                    if volume.kernelCachesWrites && item.isRegularFile {
                        volume.markChangedOutside(item)
                        volume.letGoOfOldInode(inode, knownAs: item.placement)
                    }
                }
                tellItemChanged(inode, inline: inline)
            }
        }
        return (events, outside)
    }

    // MARK: - Catching up (DESIGN.md 27)

    /// Reads and handles what is queued now on this (request) thread, unless another
    /// thread is reading the queue; false when one was, or when what was read left the
    /// watcher thread work (a rescan, new directories to watch: too heavy for a request).
    private func catchUpHere() -> Bool {
        draining.withLockIfAvailable { _ in
            let queued = clinux_bytes_queued(inotify)
            if queued > 0 {
                _ = drain(inline: false, limit: queued)
                // Requests waiting for what this read are let go by the watcher thread.
                if waiters.withLock({ !$0.isEmpty }) { wake() }
            }
            return !workLeft.load(ordering: .acquiring)
        } ?? false
    }

    /// Whether every change made to the store before this call has reached the volume's
    /// observers as far as the item `inode` is concerned (its cached pages and attributes
    /// are gone). Reads the queue itself (one `ioctl`, the usual answer "nothing queued")
    /// when no other thread is reading it.
    public func isCaughtUp(with inode: UInt64) -> Bool {
        catchUpHere() && !volume.observersHavePendingChanges(for: inode)
    }

    /// Runs `then` once every change made to the store before this call has reached the
    /// volume's observers as far as `inode` is concerned: at once, on this thread, when
    /// nothing is pending; otherwise on the thread that delivers the last of it.
    public func whenCaughtUp(with inode: UInt64, _ then: @escaping @Sendable () -> Void) {
        if catchUpHere() {
            if !volume.afterObserversCaughtUp(with: inode, then) { then() }
            return
        }
        // Everything queued now, and whatever the reader holds.
        let until = cursor.position()
        waiters.withLock { $0.append((inode, until, then)) }
        wake()
    }

    /// Reads the queue if nobody is reading it, waiting for nothing: the changes found go
    /// to the observers' queues (a truncating open, which must not wait, DESIGN.md 27).
    public func readQueue() { _ = catchUpHere() }

    private func leaveWork() {
        workLeft.store(true, ordering: .releasing)
        wake()
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    private func clearWake() {
        var count: UInt64 = 0
        _ = read(wakeFD, &count, 8)
    }

    /// Sleeps for the gathering time; true when `wake()` cut it short.
    private func sleepUnlessWoken(microseconds: UInt32) -> Bool {
        clinux_wait_readable(wakeFD, microseconds) > 0
    }

    /// MOVED_FROM halves waiting for their MOVED_TO (same cookie), by cookie.
    private var movedFrom: [UInt32: FilePath] = [:]
    /// Item events whose name was renamed away in the store before they were read.
    private var movedBeforeRead = MovedBeforeRead()
    /// A name was removed or replaced in the store: the link counts of hard-linked files
    /// the kernel holds are checked once the gulp of events is handled (`LinkCounts`).
    private var linkCountsDue = false

    /// Handles one event; true when it was a change made outside the mount.
    /// `queuedAt`: the event's position in the queue (bytes of events queued before it);
    /// `endsAt`: the next one's.
    private func handle(wd: CInt, mask: UInt32, cookie: UInt32, name: FilePath.Component?, queuedAt: UInt64, endsAt: UInt64,
                        inline: Bool) -> Bool {
        if mask & UInt32(IN_Q_OVERFLOW) != 0 {
            if inline { rescan(afterOverflow: true) } else { rescanDue = true; leaveWork() }
            return true
        }
        if mask & UInt32(IN_IGNORED) != 0 {
            if let gone = watches.removeValue(forKey: wd) { Syscall.close(gone.fd); watchEnded(inline: inline) }
            else { volume.items.fileWatches.ended(wd) }
            return false
        }
        guard let dir = watches[wd] else {
            guard let inode = volume.items.fileWatches.inode(of: wd) else { return false }
            return fileWritten(inode, queuedAt: queuedAt, inline: inline)
        }
        guard let name else {
            if mask & UInt32(IN_ATTRIB) != 0 { tellItemChanged(dir.inode, inline: inline) }
            return true
        }
        var outside = false
        // `.Trash-UID` directories are entries of the mount root, not of `STORE/trash`.
        let directoryNode = dir.inode == trashInode ? Volume.rootInode : dir.inode
        let entryMask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)
        if mask & entryMask != 0 {
            let echo = volume.ownChanges.entryEcho(dir.inode, name, queuedAt: queuedAt, watchedSince: dir.since)
            let own = echo == .own
            if mask & UInt32(IN_ISDIR) != 0 && mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 {
                if inline { watchNewDirectory(dir, name) } else { newDirectories.append((wd, name)); leaveWork() }
            }
            if mask & UInt32(IN_MOVED_FROM) != 0 { movedBeforeRead.movedAway(dir.inode, name, cookie: cookie) }
            else { movedBeforeRead.replaced(dir.inode, name) }  // made, removed or moved onto
            if !own {
                outside = true
                if mask & UInt32(IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO) != 0 {
                    volume.items.outsideEntryEpoch.add(1, ordering: .releasing)
                }
                volume.listingChanged(directoryNode)
                if echo == .uncertain {
                    volume.notify { $0.entryMayHaveAppeared(parent: directoryNode, name: name) }
                } else {
                    tellEntryChanged(parent: directoryNode, name: name, inline: inline)
                }
                tellItemChanged(directoryNode, inline: inline)
                if mask & UInt32(IN_ISDIR) == 0 {
                    if mask & UInt32(IN_CREATE) != 0 { linkMade(dir, name, inline: inline) }
                    else if mask & UInt32(IN_DELETE | IN_MOVED_TO) != 0 { linkCountsDue = true }
                }
                if let listener, listener.wantsStoreChanges, let path = relativePath(dir, name) {
                    if mask & UInt32(IN_MOVED_FROM) != 0 {
                        movedFrom[cookie] = path
                    } else if mask & UInt32(IN_MOVED_TO) != 0, let from = movedFrom.removeValue(forKey: cookie) {
                        listener.storeChanged(.moved(from: from, to: path))
                    } else {
                        listener.storeChanged(mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 ? .appeared(path) : .deleted(path))
                    }
                }
            }
        }
        let itemMask = mask & UInt32(IN_CLOSE_WRITE | IN_ATTRIB)
        if itemMask != 0, itemChanged(dir, name, mask: itemMask, queuedAt: queuedAt, endsAt: endsAt, directoryNode: directoryNode,
                                      inline: inline) {
            outside = true
        }
        // The name's item changed before it was renamed here, and the watcher found the old
        // name gone when it read that change (`MovedBeforeRead`).
        if mask & UInt32(IN_MOVED_TO) != 0, let lost = movedBeforeRead.arrived(cookie: cookie),
           itemChanged(dir, name, mask: lost, queuedAt: queuedAt, endsAt: endsAt, directoryNode: directoryNode, inline: inline) {
            outside = true
        }
        return outside
    }

    /// An item event (`mask`: IN_CLOSE_WRITE, IN_ATTRIB) of `name`; true when it was a
    /// change made outside the mount.
    private func itemChanged(_ dir: Watched, _ name: FilePath.Component, mask: UInt32, queuedAt: UInt64, endsAt: UInt64,
                             directoryNode: UInt64, inline: Bool) -> Bool {
        var gone = false
        guard let (st, departed) = stateAtEvent(dir, name, mask: mask, queuedAt: queuedAt, gone: &gone) else {
            if gone { movedBeforeRead.lost(mask, dir.inode, name) }
            return false
        }
        // The name now leads to an item the daemon made after the event was queued.
        if volume.ownChanges.madeAfter(st, queuedAt: queuedAt) { return false }
        let inode = UInt64(st.st_ino)
        // The file's own watch hears the same close next (`FileWatches`).
        if mask & UInt32(IN_CLOSE_WRITE) != 0 { volume.items.fileWatches.heardByDirectory(inode, st, endsAt: endsAt) }
        if volume.ownChanges.isOwnItemState(st, queuedAt: queuedAt, closing: mask & UInt32(IN_CLOSE_WRITE) != 0) { return false }
        changedOutside(st, knownAs: departed?.placement ?? (parent: directoryNode, name: name), inline: inline) {
            relativePath(dir, name)
        }
        return true
    }

    /// A close heard by a file's own watch (`FileWatches`): of a writer whose name went
    /// since it opened the file, or the twin of a directory's event; true when it was a
    /// change made outside the mount. A file the kernel does not hold has nothing cached
    /// (its watch stays: the next look-up may hold it again while the writer writes).
    private func fileWritten(_ inode: UInt64, queuedAt: UInt64, inline: Bool) -> Bool {
        guard let item = volume.items.item(inode), let st = try? Syscall.fstat(item.fd),
              !volume.items.fileWatches.isTwin(inode, st, queuedAt: queuedAt),
              !volume.ownChanges.isOwnItemState(st, queuedAt: queuedAt, closing: true) else { return false }
        let placement = item.placement
        changedOutside(st, knownAs: placement, inline: inline) {
            guard let (parent, name) = placement, let dir = watches.values.first(where: { $0.inode == parent }) else { return nil }
            return relativePath(dir, name)
        }
        return true
    }

    /// The item `st` describes was changed outside the mount: the kernel's caches of it go.
    /// `entry`: the name it is known by; `path`: its mount path, for presenters.
    private func changedOutside(_ st: stat, knownAs entry: (parent: UInt64, name: FilePath.Component)?, inline: Bool,
                                path: () -> FilePath?) {
        let inode = UInt64(st.st_ino)
        volume.outsideItemChanges.note(inode)  // before the table is asked: see there
        volume.forgetCachedAttributes(inode)
        let file = st.st_mode & S_IFMT == S_IFREG ? volume.items.item(inode) : nil
        // The kernel is told to drop its pages: those it reads next show this content.
        file?.pagesShow.store(ContentStamp.of(st), ordering: .relaxed)
        let held = volume.kernelCachesWrites ? file : nil
        if let held { volume.markChangedOutside(held) }
        tellItemChanged(inode, inline: inline, noted: true)
        if held != nil { volume.letGoOfOldInode(inode, knownAs: entry) }
        // While the daemon itself is changing the item, the state may have moved by
        // its hand (a write through another descriptor, a setattr not yet recorded):
        // the kernel's caches are dropped all the same (never stale), but presenters
        // hear of an uncoordinated change only when the daemon is not in the middle
        // of one of its own.
        if let listener, listener.wantsStoreChanges, !volume.ownChanges.isChanging(inode), let path = path() {
            listener.storeChanged(.changed(path))
        }
    }

    /// The state an item event (IN_CLOSE_WRITE, IN_ATTRIB) is about, read by the event's
    /// name, or by the item's descriptor when the daemon renamed the name away since
    /// (`departed`: that item; `OwnChanges.nameAtEvent`); nil when there is none to read.
    /// `gone`: set when the name leads nowhere and the daemon did not move it away.
    private func stateAtEvent(_ dir: Watched, _ name: FilePath.Component, mask: UInt32, queuedAt: UInt64,
                              gone: inout Bool) -> (stat, departed: Item?)? {
        func byDescriptor(_ inode: UInt64?) -> (stat, departed: Item?)? {
            guard let inode, let item = volume.items.item(inode), let st = try? Syscall.fstat(item.fd) else { return nil }
            return (st, item)
        }
        if case .departed(let inode) = volume.ownChanges.nameAtEvent(dir.inode, name, queuedAt: queuedAt) {
            return byDescriptor(inode)
        }
        // The link-count echo of our own unlink or rename needs no look at the item.
        if mask & UInt32(IN_ATTRIB) != 0 && volume.ownChanges.expectsRemoval(dir.inode, name, queuedAt: queuedAt, watchedSince: dir.since) { return nil }
        do {
            return (try name.withName { p throws(Errno) in try Syscall.fstatat(dir.fd, p) }, nil)
        } catch {
            // Gone: renamed away by the daemon, maybe while this thread looked.
            guard error == .noSuchFileOrDirectory else { return nil }
            switch volume.ownChanges.nameAtEvent(dir.inode, name, queuedAt: queuedAt) {
            case .departed(let inode): return byDescriptor(inode)
            case .departedIfGone(let inode): return byDescriptor(inode)
            case .current:
                gone = true
                return nil
            }
        }
    }

    /// A name made in the store: if it is a new link to a file the kernel holds, that
    /// file's link count moved, which no event tells (`LinkCounts`).
    private func linkMade(_ dir: Watched, _ name: FilePath.Component, inline: Bool) {
        guard let st = try? name.withName({ p throws(Errno) in try Syscall.fstatat(dir.fd, p) }), st.st_nlink > 1,
              volume.items.item(UInt64(st.st_ino)) != nil else { return }
        volume.items.linkCounts.note(UInt64(st.st_ino), st)
        tellItemChanged(UInt64(st.st_ino), inline: inline)
    }

    private func tellEntryChanged(parent: UInt64, name: FilePath.Component, inline: Bool) {
        if inline { volume.notify { $0.entryChangedOutside(parent: parent, name: name) } }
        else { volume.notify { $0.entryChanged(parent: parent, name: name) } }
    }

    /// Tells the observers; first notes the change for a look-up racing it
    /// (`OutsideItemChanges`), unless `noted` already.
    private func tellItemChanged(_ inode: UInt64, inline: Bool, noted: Bool = false) {
        if !noted { volume.outsideItemChanges.note(inode) }
        if inline { volume.notify { $0.itemChangedOutside(inode) } } else { volume.notify { $0.itemChanged(inode) } }
    }

    /// A watched directory was removed: end its watch and close its descriptor (the
    /// descriptor would otherwise keep the removed directory, and its watch, alive).
    private func unwatch(parent: CInt, name: FilePath.Component, inline: Bool) {
        guard let (wd, gone) = watches.first(where: { $0.value.parent == parent && $0.value.name == name }) else { return }
        watches[wd] = nil
        _ = clinux_inotify_rm_watch(inotify, wd)
        Syscall.close(gone.fd)
        watchEnded(inline: inline)
    }

    /// A watch ended, which may bring a try to watch everything again nearer. On a request
    /// thread (catching up for an OPEN) the watcher may be asleep with no timer, its queue
    /// drained by that thread: told there is work, it sets the timer for a try to come.
    private func watchEnded(inline: Bool) {
        if let wait = considerRetry(), wait > 0, !inline { leaveWork() }
    }

    /// A directory appeared: watch it and every directory below it; what one the kernel
    /// holds already lists (made before the watch existed, the classic inotify race) is
    /// reported by `watchTree`, so that no cached entry of it survives.
    private func watchNewDirectory(_ parent: Watched, _ name: FilePath.Component) {
        refreshBudget()
        guard let fd = try? name.withName({ p in openToWatch(parent.fd, p) }) else { return }
        guard let st = try? Syscall.fstat(fd) else { Syscall.close(fd); return }
        let parentWD = watches.first { $0.value.inode == parent.inode }?.key ?? -1
        watchTree(fd, parent: parentWD, name: name)
        // Held already: moved here from elsewhere (another `..`), or listed before its watch.
        volume.listingChanged(UInt64(st.st_ino))
    }

    /// After an overflow, or to become complete again: every directory is watched again
    /// and every item the kernel holds is invalidated (what changed while unwatched, or in
    /// the events lost, is dropped); observers are told to resynchronise. A try to become
    /// complete that fails changes nothing else (the queue is intact: the daemon's own
    /// changes are still recognised).
    private func rescan(afterOverflow: Bool) {
        let incomplete = !complete.load(ordering: .acquiring)
        logger.warning(afterOverflow ? "inotify queue overflowed; rescanning the store" : "trying to watch every directory of the store again")
        let giveUpsBefore = giveUps
        if afterOverflow {
            volume.ownChanges.reset()
            movedBeforeRead.reset()
        }
        refreshBudget()
        watchStore()
        let watchesAll = giveUps == giveUpsBefore
        guard afterOverflow || watchesAll else { return }
        volume.outsideItemChanges.noteEverything()  // a look-up under way reads its state again
        // Names may have moved or gone in what was lost: every item is due for a check of its
        // name at its next OPEN, and a look-up under another name follows it (DESIGN.md 27).
        volume.items.outsideEntryEpoch.add(1, ordering: .releasing)
        volume.everyListingChanged()
        let inodes = volume.items.allInodes()
        var files: [Item] = []  // under writeback: what may have changed unseen (DESIGN.md 22)
        for inode in inodes {
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
        // Long timeouts and kept pages again. The invalidations above are queued first and
        // an OPEN waits for its item's (`isCaughtUp`); one that caught up before this point
        // keeps no pages (it saw the mount incomplete, FUSEBridge.open).
        if incomplete && watchesAll {
            retry.succeeded()
            complete.store(true, ordering: .releasing)
            logger.notice("every directory of the store is watched again (\(watches.count)); using long cache timeouts")
        }
    }

    /// The mount path (rooted at the mount: `/containers/…`) of `name` in a watched directory: the directory's backing
    /// path (from /proc) less the store's, with `trash/` folded away (`.Trash-UID` sits at
    /// the mount root).
    private func relativePath(_ dir: Watched, _ name: FilePath.Component) -> FilePath? {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(dir.fd)") else { return nil }
        var path = FilePath(target)
        guard path.removePrefix(volume.store.resolvedPath) else { return nil }  // /proc resolves links
        path.root = "/"
        if path.components.first?.string == "trash" { path = FilePath(root: "/", path.components.dropFirst()) }
        return path.appending(name)
    }
}

/// Hears of changes made to the store outside the mount, by mount-relative path.
public protocol StoreChangeListener: Sendable {
    /// Whether anyone would hear of it: computing paths costs a readlink per event.
    var wantsStoreChanges: Bool { get }
    func storeChanged(_ event: PresenterEvent)
}
