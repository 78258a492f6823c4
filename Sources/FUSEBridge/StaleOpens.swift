import Dispatch
import Glibc
import FileManagerCore
import Synchronization
import SystemPackage

/// Opens just answered ESTALE (a name replaced in the store while the kernel had it
/// cached, DESIGN.md 27), by the thread that made them.
///
/// The VFS retries such an open once, after looking the path up afresh, and hands a second
/// ESTALE to the program. The retry's own OPEN is therefore served whatever happened in the
/// store since: a file replaced again between the fresh lookup and the open is opened as
/// found, as on any file system where a rename races an open. The kernel sends the retry
/// from the same thread (the request's pid is the thread id), for the item now under the
/// same name, or for the same item when there was no path to walk again (`/proc/PID/fd`).
/// The thread's LOOKUPs in between are the fresh walk (`lookedUp`, `LOOKUP_REVAL` looks
/// every component up again), and the last of them resolves the name the retry opens: the
/// item it found is the one the retry opens, whatever the item is known by (a hard link's
/// other name, moved in the store over the replaced file) and whatever name the daemon had
/// recorded for the replaced item (one the store moved it to since the kernel resolved it:
/// the kernel walks the name it holds). Either would else be answered ESTALE again, which
/// the program would see. A retry whose walk failed (the file was deleted) never comes: its
/// entry must not excuse the thread's next, unrelated open. But a failed LOOKUP may be the
/// kernel's revalidation of a name that is gone, which it follows with a look-up of the
/// same name afresh, and that finds the file if the store made it again in between: the
/// walk goes on. So a failed LOOKUP marks the entry, a successful one of the same name
/// takes the mark away, and anything else ends the walk: another LOOKUP drops the entry,
/// and the OPEN finds none. The entry holds the item itself, whose
/// descriptor pins its inode: matched by number, a file made later under the freed number
/// could be taken for the retry, and a stale entry of it served.
final class StaleOpens: Sendable {
    /// How long an entry is kept for a retry that may never come (its lookup failed): any
    /// OPEN by the thread uses it up, so this only bounds what a thread that never opens
    /// again leaves behind. Long: the retry's OPEN may itself wait for the store's news.
    static let window: UInt64 = 60_000_000_000

    struct Answered {
        let at: UInt64
        let item: Item
        let parent: UInt64
        let name: FilePath.Component
        /// What the thread's fresh look-up of the name found.
        var found: Item?
        /// The name the walk's last LOOKUP failed to find, if it did: only a look-up of it
        /// afresh goes on with the walk.
        var failed: (parent: UInt64, name: FilePath.Component)?

        /// Whether an open of `item`, now last seen as `name` in `parent`, retries this one:
        /// the file the fresh look-up found, the file now under the same name (a replaced
        /// one), or the same file (whose recorded name the retry's fresh look-up may have
        /// moved: a hard link's other name, found after the name it was known by was moved
        /// away in the store).
        func isRetry(of item: Item, _ parent: UInt64, _ name: FilePath.Component) -> Bool {
            item === self.item || item === found || (parent == self.parent && name == self.name)
        }
    }
    private struct State {
        var answered: [Int32: Answered] = [:]

        /// `now` is read under the lock: a time read before it could precede an entry made
        /// meanwhile, and the unsigned difference would throw that entry away.
        mutating func prune(now: UInt64) {
            if !answered.isEmpty { answered = answered.filter { now &- $0.value.at < StaleOpens.window } }
        }
    }
    private let state = Mutex(State())
    /// Whether `state` holds anything: the usual OPEN reads this and takes no lock.
    private let pending = Atomic<Bool>(false)

    /// Records that `pid`'s open of `item`, last seen as `name` in `parent`, is answered ESTALE.
    /// Callers outside the daemon's pid namespace arrive as pid 0: they are not told apart,
    /// so they get no exemption (a second ESTALE is the worst they see).
    func answered(_ pid: Int32, item: Item, parent: UInt64, name: FilePath.Component) {
        guard pid != 0 else { return }
        state.withLock { s in
            let now = DispatchTime.now().uptimeNanoseconds
            s.prune(now: now)
            s.answered[pid] = Answered(at: now, item: item, parent: parent, name: name)
            pending.store(true, ordering: .releasing)
        }
    }

    /// Takes what was recorded for `pid`: every OPEN by a thread uses it up, for the retry
    /// is that thread's very next OPEN (the fresh walk in between only looks up). Whether the
    /// open is that retry is then a question of its name (`isRetry(of:)`).
    func take(_ pid: Int32) -> Answered? {
        guard pid != 0, pending.load(ordering: .acquiring) else { return nil }
        return state.withLock { s in
            s.prune(now: DispatchTime.now().uptimeNanoseconds)
            let taken = s.answered.removeValue(forKey: pid)
            pending.store(!s.answered.isEmpty, ordering: .releasing)
            return taken?.failed == nil ? taken : nil  // a walk that failed: no retry
        }
    }

    /// `pid`'s LOOKUP of `name` in `parent` found `item` (nil: nothing). If that thread's
    /// last open was answered ESTALE, this is part of the retry's fresh walk, and the walk's
    /// last LOOKUP is of the name the retry opens: its OPEN is of `item`. `pid` is read only
    /// while some open was answered ESTALE.
    func lookedUp(_ pid: @autoclosure () -> Int32, parent: UInt64, name: UnsafePointer<CChar>, found item: Item?) {
        guard pending.load(ordering: .acquiring) else { return }
        let pid = pid()
        guard pid != 0 else { return }
        state.withLock { s in
            guard var entry = s.answered[pid] else { return }
            // After a failure, only a look-up of the same name that finds it goes on with the
            // walk: anything else means the walk ended there, and this look-up is another's.
            if let failed = entry.failed, item == nil || failed.parent != parent
                || failed.name.withPlatformString({ strcmp($0, name) != 0 }) {
                s.answered[pid] = nil
                pending.store(!s.answered.isEmpty, ordering: .releasing)
                return
            }
            entry.found = item
            entry.failed = item == nil ? FilePath.Component(platformString: name).map { (parent, $0) } : nil
            s.answered[pid] = entry
        }
    }
}
