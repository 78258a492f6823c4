import CFuse
import CFuseTap
import FileManagerCore
import Foundation
import Synchronization
import SystemPackage

/// Tells the kernel to drop cached entries and attributes when the store changed without
/// the kernel seeing it (a CLI command the daemon ran, an edit found by the store watcher).
///
/// The `fuse_lowlevel_notify_*` calls run on the notifier's own threads, never inside a
/// request handler, on the store watcher's thread or under a core lock: libfuse documents
/// that the kernel may answer such a call by sending a request to this very daemon, and a
/// call can wait in the kernel for as long as a request parked on a claim holds a lock it
/// needs (DESIGN.md 35). Each call goes to the lane of what it waits for (`Lane`), so a
/// blocked one holds up only later calls of its own lane.
///
/// A request that must not be answered before queued notifications took effect (an OPEN
/// after an edit in the store, DESIGN.md 27; an OPENDIR whose listing must go, 34) queues
/// its answer behind those of its own item.
///
/// Sendable note: `session` is fixed for the notifier's life; the lanes and `retries` are
/// behind their locks.
public final class KernelNotifier: VolumeObserver, @unchecked Sendable {
    /// What a notification may wait for in the kernel.
    enum Lane: Hashable, Sendable {
        /// Entry invalidations and expiries in a directory take the directory's lock, held
        /// by a namespace request (create, unlink, rename …) parked on a claim.
        case entries(of: UInt64)
        /// An inode invalidation locks the item's cached pages, which a read parked on a
        /// claim holds. OPENs wait for this lane of their item only.
        case item(UInt64)
        case prune
    }

    struct Retry {
        /// Retries sent so far.
        var tries: Int
        var due: DispatchTime
        /// Handed to the item's lane and not tried yet: kept, so that a failure meanwhile
        /// does not start the back-off again, and a success cancels it.
        var sent = false
    }

    private let session: OpaquePointer
    /// Where the kernel's protocol version is learnt (INIT), and which items the kernel
    /// holds: only those are worth a notification (others answer ENOENT).
    private let bridge: FUSEBridge
    /// Set when the kernel refused FUSE_NOTIFY_PRUNE after all.
    private let pruneRefused = Atomic<Bool>(false)
    private let lanes = KeyedLanes<Lane>(name: "cfs-inval")
    /// Invalidations the kernel answered ENOENT for an item the daemon holds: the kernel has
    /// been told of the item (a LOOKUP, READDIRPLUS or CREATE answer on its way) but has not
    /// made its inode yet, and would make it with the attributes of before the change. Sent
    /// again after 1, 2, 4 … 512 ms until the kernel knows the item (the requesting task
    /// makes the inode once it runs, which a loaded machine may delay), by the retry thread
    /// handing them to the item's lane when due.
    private let retries = Mutex<[UInt64: Retry]>([:])
    private let retryWakeup = DispatchSemaphore(value: 0)
    private let running = Atomic<Bool>(true)
    private let retryFinished = DispatchSemaphore(value: 0)
    static let firstRetryNanoseconds = 1_000_000
    static let retryLimit = 10

    init(session: OpaquePointer, bridge: FUSEBridge) {
        self.session = session
        self.bridge = bridge
        Threads.start(named: "cfs-inval-retry") { [self] in retryLoop() }
    }

    /// Stops the threads and waits for them, after answers waiting behind notifications
    /// went out: after this, the session may be destroyed.
    public func stop() {
        running.store(false, ordering: .releasing)
        retryWakeup.signal()
        retryFinished.wait()
        lanes.stop()
    }

    public func entryChanged(parent: UInt64, name: FilePath.Component) {
        guard bridge.nodes.item(parent) != nil else { return }
        lanes.add(.entries(of: parent)) { [self] in invalidateEntry(parent: parent, name: name) }
    }

    // What a new directory already held when its watch began: most of it is the daemon's
    // own (`mkdir -p a/b` through the mount), and a process may already work in `a/b`.
    // An invalidation would unhash that entry and break its `getcwd`; an expiry (protocol
    // 7.38) makes the kernel look the name up again at its next use, which is all a
    // negative entry needs. libfuse 3.14 cannot set the flag; the tap writes the message.
    public func entryMayHaveAppeared(parent: UInt64, name: FilePath.Component) {
        guard bridge.nodes.item(parent) != nil else { return }
        lanes.add(.entries(of: parent)) { [self] in
            guard bridge.kernelMinor.load(ordering: .acquiring) >= 38, !sessionEnded else {
                return invalidateEntry(parent: parent, name: name)
            }
            let expired = name.withPlatformString { p in
                cfusetap_notify_expire_entry(fuse_session_fd(session), parent, p, UInt32(strlen(p))) == 0
            }
            if !expired { invalidateEntry(parent: parent, name: name) }
        }
    }

    /// Counted on the item's node until the kernel dropped the entry, and for
    /// `NodeTable.Node.oldNameGrace` after (`NodeTable.mayBeReachedThroughOldName`).
    public func nameLeftBehind(_ inode: UInt64, parent: UInt64, name: FilePath.Component) {
        guard bridge.nodes.item(parent) != nil else { return }
        let node = bridge.nodes.oldNameQueued(inode)
        lanes.add(.entries(of: parent)) { [self] in
            invalidateEntry(parent: parent, name: name)
            if let node { bridge.nodes.oldNameTaken(node) }
        }
    }

    /// Under writeback, a file whose kernel inode now predates the change is also let go
    /// of (`letGoOfOldState`).
    public func itemChanged(_ inode: UInt64) {
        guard let node = bridge.nodes.view(inode) else { return }
        lanes.add(.item(inode)) { [self] in
            if invalidateInode(inode) { retries.withLock { $0[inode] = nil } } else { retryLater(inode) }
        }
        if bridge.kernelMayHoldOldState(node) { letGoOfOldState(inode) }
    }

    // An OPEN waits only for its own item's lane: not for entry invalidations, which may
    // wait for a directory lock (held by a request parked on a claim), and which the open
    // needs none of; nor for another item's pages.
    public func hasPendingChanges(for inode: UInt64) -> Bool { lanes.hasWork(.item(inode)) }

    public func afterPendingChanges(for inode: UInt64, _ body: @escaping @Sendable () -> Void) -> Bool {
        lanes.after(.item(inode), body)
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
        lanes.add(.prune) { [self] in prune(inodes) }
    }

    /// Under writeback: the kernel is asked to let go of the regular file's inode, which
    /// predates an edit made in the store, by every unused entry of it (a hard link's other
    /// names, names the store gave the file, which the daemon does not know the kernel
    /// holds). A prune leaves an entry in use at that moment (a `stat` under way), and with
    /// it the stale inode: it is sent again after 1, 2, 4 … 128 ms while the kernel's inode
    /// is still that old (one held open stays so until its last close, which
    /// `FUSEBridge.handleReleased` covers).
    private func letGoOfOldState(_ inode: UInt64) {
        guard canLetGo else { return }
        lanes.add(.prune) { [self] in pruneOldState(inode, tries: 0) }
    }

    private func pruneOldState(_ inode: UInt64, tries: Int) {
        guard let node = bridge.nodes.view(inode), bridge.kernelMayHoldOldState(node) else { return }
        prune([inode])
        guard tries < 8 else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Self.firstRetryNanoseconds << tries)) { [self] in
            guard running.load(ordering: .acquiring) else { return }
            lanes.add(.prune) { [self] in pruneOldState(inode, tries: tries + 1) }
        }
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

    /// FUSE_NOTIFY_INVAL_ENTRY: the kernel drops the entry `name` of `parent` (unhashed
    /// even while in use) and looks the name up again at its next use.
    private func invalidateEntry(parent: UInt64, name: FilePath.Component) {
        guard !sessionEnded else { return }
        name.withPlatformString { p in
            _ = fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(parent), p, strlen(p))
        }
    }

    /// FUSE_NOTIFY_INVAL_INODE: the kernel drops the item's attributes and pages. Returns
    /// whether that is settled: false when the kernel does not know the item although the
    /// daemon holds it. An answer that names the item is then still on its way to the
    /// kernel (a READDIRPLUS buffer is sent whole, after every entry in it was looked up),
    /// and the inode it makes would keep the attributes of before the change for as long
    /// as they are cached (DESIGN.md 14): to be sent again (`retries`).
    private func invalidateInode(_ inode: UInt64) -> Bool {
        guard !sessionEnded else { return true }
        let rc = fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(inode), 0, 0)
        return rc != -ENOENT || bridge.nodes.item(inode) == nil
    }

    /// Once the session ended there is nobody to tell; it is unmounted right after, which
    /// closes the descriptor (libfuse then sends to -1: EBADF, never to a reused number
    /// but in the instant between this check and the send).
    private var sessionEnded: Bool { fuse_session_exited(session) != 0 }

    /// Schedules the first retry of an invalidation the kernel could not take yet, unless
    /// one is scheduled or on its way already (a failure does not restart the back-off).
    private func retryLater(_ inode: UInt64) {
        let added = retries.withLock { r in
            guard r[inode] == nil else { return false }
            r[inode] = Retry(tries: 0, due: .now() + .nanoseconds(Self.firstRetryNanoseconds))
            return true
        }
        if added { retryWakeup.signal() }
    }

    /// A retry the retry thread handed to the item's lane: sent unless a success cancelled
    /// it meanwhile, and scheduled again, later, if the kernel still does not know the item.
    private func retry(_ inode: UInt64) {
        guard retries.withLock({ $0[inode]?.sent == true }) else { return }
        let settled = invalidateInode(inode)
        let again = retries.withLock { r -> Bool in
            guard var retry = r[inode], retry.sent else { return false }
            retry.tries += 1
            if settled || retry.tries >= Self.retryLimit {
                r[inode] = nil
                return false
            }
            retry.due = .now() + .nanoseconds(Self.firstRetryNanoseconds << retry.tries)
            retry.sent = false
            r[inode] = retry
            return true
        }
        if again { retryWakeup.signal() }
    }

    private func retryLoop() {
        defer { retryFinished.signal() }
        while running.load(ordering: .acquiring) {
            if let due = retries.withLock({ $0.values.filter { !$0.sent }.map(\.due).min() }) {
                _ = retryWakeup.wait(timeout: due)
            } else {
                retryWakeup.wait()
            }
            guard running.load(ordering: .acquiring) else { return }
            let now = DispatchTime.now()
            let due = retries.withLock { r -> [UInt64] in
                let due = r.filter { !$0.value.sent && $0.value.due <= now }.map(\.key)
                for inode in due { r[inode]?.sent = true }
                return due
            }
            for inode in due { lanes.add(.item(inode)) { [self] in retry(inode) } }
        }
    }
}

extension FUSESession {
    /// A notifier bound to this session (valid once mounted).
    public func makeNotifier() -> KernelNotifier? {
        sessionPointer.map { KernelNotifier(session: $0, bridge: bridge) }
    }
}
