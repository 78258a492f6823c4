import CFuse
import CFuseTap
import FileManagerCore
import Foundation
import Synchronization
import SystemPackage

/// Tells the kernel to drop cached entries and attributes when the store changed without
/// the kernel seeing it (a CLI command the daemon ran, later an edit found by inotify).
///
/// The `fuse_lowlevel_notify_*` calls run on this type's own thread, never inside a request
/// handler or under a core lock: libfuse documents that the kernel may answer such a call
/// by sending a request to this very daemon, which would deadlock a handler waiting for it.
///
/// A request that must not be answered before queued notifications took effect (an OPEN
/// after an edit in the store, DESIGN.md 27) queues its answer behind them.
///
/// Sendable note: `session` is fixed for the notifier's life; the queue is behind `jobs`.
public final class KernelNotifier: VolumeObserver, @unchecked Sendable {
    enum Job {
        case entry(parent: UInt64, name: FilePath.Component)
        case inode(UInt64)
        case prune([UInt64])
        case expire(parent: UInt64, name: FilePath.Component)
    }

    struct Queue {
        var jobs: [Job] = []
        /// Items with an `.inode` job queued or being worked through, and how many.
        var items: [UInt64: Int] = [:]
        /// Answers waiting for an item's queued jobs, run right after its last one.
        var waiting: [UInt64: [@Sendable () -> Void]] = [:]
    }

    private let session: OpaquePointer
    /// Only items the kernel holds are worth a notification (others answer ENOENT).
    private let volume: Volume
    /// Where the kernel's protocol version is learnt (INIT).
    private let bridge: FUSEBridge
    /// Set when the kernel refused FUSE_NOTIFY_PRUNE after all.
    private let pruneRefused = Atomic<Bool>(false)
    private let queue = Mutex<Queue>(Queue())
    private let wakeup = DispatchSemaphore(value: 0)
    private let running = Atomic<Bool>(true)
    private let finished = DispatchSemaphore(value: 0)
    /// Entry invalidations nobody waits for (`entryLeadsToOldState`), on a thread of their
    /// own: one may wait for a directory's lock, and the jobs above, which OPENs wait for,
    /// must not wait behind it.
    private let detached = Mutex<[(parent: UInt64, name: FilePath.Component)]>([])
    private let detachedWakeup = DispatchSemaphore(value: 0)
    private let detachedFinished = DispatchSemaphore(value: 0)
    /// Invalidations the kernel answered ENOENT for an item the daemon holds: the kernel has
    /// been told of the item (a LOOKUP, READDIRPLUS or CREATE answer on its way) but has not
    /// made its inode yet, and would make it with the attributes of before the change. Sent
    /// again after 1, 2, 4 … 512 ms until the kernel knows the item (the requesting task
    /// makes the inode once it runs, which a loaded machine may delay). Only the loop's
    /// thread touches them.
    private var unknownYet: [UInt64: (tries: Int, due: DispatchTime)] = [:]
    static let firstRetryNanoseconds = 1_000_000
    static let retryLimit = 10

    init(session: OpaquePointer, bridge: FUSEBridge) {
        self.session = session
        self.volume = bridge.volume
        self.bridge = bridge
        let thread = Thread { [self] in loop() }
        thread.name = "cfs-invalidate"
        thread.start()
        let entries = Thread { [self] in detachedLoop() }
        entries.name = "cfs-invalidate-entries"
        entries.start()
    }

    /// Stops the thread and waits for it: after this, the session may be destroyed.
    public func stop() {
        running.store(false, ordering: .releasing)
        wakeup.signal()
        detachedWakeup.signal()
        finished.wait()
        detachedFinished.wait()
    }

    public func entryChanged(parent: UInt64, name: FilePath.Component) {
        guard volume.item(parent) != nil else { return }
        enqueue(.entry(parent: parent, name: name))
    }

    // What a new directory already held when its watch began: most of it is the daemon's
    // own (`mkdir -p a/b` through the mount), and a process may already work in `a/b`.
    // An invalidation would unhash that entry and break its `getcwd`; an expiry (protocol
    // 7.38) makes the kernel look the name up again at its next use, which is all a
    // negative entry needs. libfuse 3.14 cannot set the flag; the tap writes the message.
    public func entryMayHaveAppeared(parent: UInt64, name: FilePath.Component) {
        guard volume.item(parent) != nil else { return }
        if bridge.kernelMinor.load(ordering: .acquiring) >= 38 {
            enqueue(.expire(parent: parent, name: name))
        } else {
            enqueue(.entry(parent: parent, name: name))
        }
    }

    public func entryLeadsToOldState(parent: UInt64, name: FilePath.Component) {
        guard volume.item(parent) != nil else { return }
        detached.withLock { $0.append((parent, name)) }
        detachedWakeup.signal()
    }

    public func itemChanged(_ inode: UInt64) {
        guard volume.item(inode) != nil else { return }
        enqueue(.inode(inode))
    }

    // An OPEN waits only for its own item's jobs, and goes out right after the last of
    // them, not behind the entry invalidations queued after it: those may wait for a
    // directory lock (held by a request parked on a claim), and the open needs none of it.
    public func hasPendingChanges(for inode: UInt64) -> Bool { queue.withLock { $0.items[inode] != nil } }

    public func afterPendingChanges(for inode: UInt64, _ body: @escaping @Sendable () -> Void) -> Bool {
        queue.withLock { q in
            // Once stopping, the loop's last look at `waiting` may be over (it takes this
            // lock after `running` went false): the caller runs `body` itself.
            guard q.items[inode] != nil, running.load(ordering: .acquiring) else { return false }
            q.waiting[inode, default: []].append(body)
            return true
        }
    }

    // FUSE_NOTIFY_PRUNE (protocol 7.45): the kernel drops the items' entries that nobody
    // uses (no working directory, open file or mount among them) and then forgets the
    // items. Gated on the minor the kernel offered in INIT, deliberately: the negotiated
    // one is libfuse 3.14's (below 45), and the kernel does not check it for
    // notifications. libfuse 3.14 has no call for it; the tap writes the message.
    public var canLetGo: Bool {
        bridge.kernelMinor.load(ordering: .acquiring) >= 45 && !pruneRefused.load(ordering: .relaxed)
    }

    public func letGo(_ inodes: [UInt64]) {
        guard canLetGo, !inodes.isEmpty else { return }
        enqueue(.prune(inodes))
    }

    private func prune(_ inodes: [UInt64]) {
        guard !sessionEnded else { return }
        let rc = inodes.withUnsafeBufferPointer { ids in
            cfusetap_notify_prune(fuse_session_fd(session), ids.baseAddress, UInt32(ids.count))
        }
        if rc < 0 && !pruneRefused.exchange(true, ordering: .relaxed) {
            bridgeLogger.warning("the kernel refused FUSE_NOTIFY_PRUNE (\(Errno(rawValue: -rc))); shedding descriptors spares directories from now on")
        }
    }

    private func enqueue(_ job: Job) {
        queue.withLock { q in
            q.jobs.append(job)
            if case .inode(let inode) = job { q.items[inode, default: 0] += 1 }
        }
        wakeup.signal()
    }

    // Changes found by the store watcher are told to the kernel at once, from the watcher's
    // thread (no request handler, no lock held): one thread hop fewer between an edit in the
    // store and the kernel forgetting what it cached.
    public func entryChangedOutside(parent: UInt64, name: FilePath.Component) {
        guard volume.item(parent) != nil else { return }
        invalidateEntry(parent: parent, name: name)
    }

    /// FUSE_NOTIFY_INVAL_ENTRY: the kernel drops the entry `name` of `parent` (unhashed
    /// even while in use) and looks the name up again at its next use.
    private func invalidateEntry(parent: UInt64, name: FilePath.Component) {
        guard !sessionEnded else { return }
        name.withPlatformString { p in
            _ = fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(parent), p, strlen(p))
        }
    }

    public func itemChangedOutside(_ inode: UInt64) {
        guard volume.item(inode) != nil else { return }
        if !invalidateInode(inode) { enqueue(.inode(inode)) }  // its retries are the loop's
    }

    /// FUSE_NOTIFY_INVAL_INODE: the kernel drops the item's attributes and pages. Returns
    /// whether that is settled: false when the kernel does not know the item although the
    /// daemon holds it. An answer that names the item is then still on its way to the
    /// kernel (a READDIRPLUS buffer is sent whole, after every entry in it was looked up),
    /// and the inode it makes would keep the attributes of before the change for as long
    /// as they are cached (DESIGN.md 14): to be sent again (`unknownYet`).
    private func invalidateInode(_ inode: UInt64) -> Bool {
        guard !sessionEnded else { return true }
        let rc = fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(inode), 0, 0)
        return rc != -ENOENT || volume.item(inode) == nil
    }

    /// Once the session ended there is nobody to tell; it is unmounted right after, which
    /// closes the descriptor (libfuse then sends to -1: EBADF, never to a reused number
    /// but in the instant between this check and the send).
    private var sessionEnded: Bool { fuse_session_exited(session) != 0 }

    /// Sends again the invalidations due of those the kernel could not take yet.
    private func retryUnknown() {
        let now = DispatchTime.now()
        var left: [UInt64: (tries: Int, due: DispatchTime)] = [:]
        for (inode, r) in unknownYet {
            if r.due > now { left[inode] = r; continue }
            if invalidateInode(inode) || r.tries + 1 >= Self.retryLimit { continue }
            left[inode] = (r.tries + 1, now + .nanoseconds(Self.firstRetryNanoseconds << (r.tries + 1)))
        }
        unknownYet = left
    }

    /// The next retry due, if any.
    private var nextRetry: DispatchTime? { unknownYet.values.map(\.due).min() }

    private func detachedLoop() {
        defer { detachedFinished.signal() }
        while running.load(ordering: .acquiring) {
            detachedWakeup.wait()
            guard running.load(ordering: .acquiring) else { return }
            let batch: [(parent: UInt64, name: FilePath.Component)] = detached.withLock { q in
                defer { q.removeAll() }
                return q
            }
            for entry in batch { invalidateEntry(parent: entry.parent, name: entry.name) }
        }
    }

    private func loop() {
        defer {
            // Answers waiting behind notifications still go out, before the session does.
            for body in queue.withLock({ Array($0.waiting.values.joined()) }) { body() }
            finished.signal()
        }
        while running.load(ordering: .acquiring) {
            if let due = nextRetry { _ = wakeup.wait(timeout: due) } else { wakeup.wait() }
            guard running.load(ordering: .acquiring) else { return }
            if !unknownYet.isEmpty { retryUnknown() }
            let batch = queue.withLock { q -> [Job] in
                defer { q.jobs.removeAll() }
                return q.jobs
            }
            for job in batch {
                switch job {
                case .entry(let parent, let name):
                    invalidateEntry(parent: parent, name: name)
                case .prune(let inodes):
                    prune(inodes)
                case .expire(let parent, let name):
                    guard !sessionEnded else { continue }
                    let expired = name.withPlatformString { p in
                        cfusetap_notify_expire_entry(fuse_session_fd(session), parent, p, UInt32(strlen(p))) == 0
                    }
                    if !expired { invalidateEntry(parent: parent, name: name) }
                case .inode(let inode):
                    if invalidateInode(inode) { unknownYet[inode] = nil }
                    else if unknownYet[inode] == nil { unknownYet[inode] = (0, .now() + .nanoseconds(Self.firstRetryNanoseconds)) }
                    let ready = queue.withLock { q -> [@Sendable () -> Void] in
                        let left = (q.items[inode] ?? 1) - 1
                        q.items[inode] = left > 0 ? left : nil
                        return left > 0 ? [] : (q.waiting.removeValue(forKey: inode) ?? [])
                    }
                    ready.forEach { $0() }
                }
            }
        }
    }
}

extension FUSESession {
    /// A notifier bound to this session (valid once mounted).
    public func makeNotifier() -> KernelNotifier? {
        sessionPointer.map { KernelNotifier(session: $0, bridge: bridge) }
    }
}
