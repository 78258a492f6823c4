import CLinux
import Glibc
import Synchronization
import SystemPackage

/// Watches of single files: those the kernel holds under more than one name when one of
/// the names goes (DESIGN.md 14, "Hard links").
///
/// The store's directories are watched with IN_EXCL_UNLINK, so the close of a descriptor
/// whose name was unlinked or replaced since it was opened reaches no directory's watch
/// (and without the flag the event would name what the name leads to now). A program in
/// the store writing a hard-linked file through the name that went was never heard, and
/// the mount kept the old pages and size under the file's other names. A watch of the
/// file itself hears that close. It is taken when a name of such a file goes, in the
/// store (the watcher sees the link count fall, `LinkCounts`) or through the mount (before
/// the daemon's unlink or rename), and ends when the file's last name goes (inotify's
/// IN_IGNORED: a watch keeps no removed file alive). It outlives the kernel's hold on the
/// file: under `-o writeback` the watcher itself makes the kernel let go of a file changed
/// in the store, the next look-up holds it again, and the writer may still be writing.
///
/// A close through a name that is still there reaches the directory's watch and then the
/// file's, queued one right after the other (`fsnotify` reports the parent's mark first).
/// The second is that close's twin, not another (`isTwin`): else the daemon's own close
/// would be its echo once and an outside change the second time.
///
/// At most `limit` files are watched. At the limit a new watch takes the place of watches
/// of files the kernel no longer holds, among the first 32 looked at; if there are none,
/// the file is heard as before (when its attributes expire).
final class FileWatches: Sendable {
    /// How many files may be watched at once.
    let limit: Int
    /// Only closes of written files: a file's own watch also hears every change of its
    /// link count (IN_ATTRIB), the daemon's included, which its directories tell already.
    static let mask = UInt32(IN_CLOSE_WRITE)

    /// The store watcher's inotify descriptor; -1 until a watcher runs (nothing is watched).
    let descriptor = Atomic<CInt>(-1)

    /// A close a directory's watch heard: where its event ends in the queue, and the state
    /// it read. The file's own event of that close starts there and reads the same.
    private struct Heard: Equatable {
        let endsAt: UInt64
        let seconds: Int
        let nanoseconds: Int
        let size: Int

        init(_ st: stat, endsAt: UInt64) {
            self.endsAt = endsAt
            (seconds, nanoseconds, size) = (st.st_ctim.tv_sec, st.st_ctim.tv_nsec, st.st_size)
        }
    }

    private struct Table {
        var inodes: [CInt: UInt64] = [:]
        var watches: [UInt64: (wd: CInt, heard: Heard?)] = [:]
    }
    private let table = Mutex(Table())
    /// `inodes.count`, read without the lock for every event.
    private let size = Atomic<Int>(0)

    init(limit: Int = 1_024) { self.limit = limit }

    /// Watches the file `item` (a regular file with a name left) unless it is watched
    /// already; at the limit, see above (`isHeld`: whether the kernel holds an inode).
    func watch(_ item: Item, isHeld: (UInt64) -> Bool) {
        let inotify = descriptor.load(ordering: .acquiring)
        guard inotify >= 0, item.isRegularFile else { return }
        table.withLock { t in
            guard t.watches[item.inode] == nil else { return }
            if t.inodes.count >= limit {
                for (inode, watch) in t.watches.prefix(32) where !isHeld(inode) {
                    t.inodes[watch.wd] = nil
                    t.watches[inode] = nil
                    _ = clinux_inotify_rm_watch(inotify, watch.wd)
                }
                size.store(t.inodes.count, ordering: .relaxed)
                guard t.inodes.count < limit else { return }
            }
            // Not a path: the file's own descriptor, whatever its names are now.
            let wd = (try? Syscall.withProcPath(item.fd) { path throws(Errno) in
                clinux_inotify_add_watch(inotify, path, Self.mask)
            }) ?? -1
            guard wd >= 0 else { return }  // no read permission, no watches left: as before
            t.inodes[wd] = item.inode
            t.watches[item.inode] = (wd, nil)
            size.store(t.inodes.count, ordering: .relaxed)
        }
    }

    /// The file a watch is of; nil for a directory's watch.
    func inode(of wd: CInt) -> UInt64? {
        guard size.load(ordering: .relaxed) > 0 else { return nil }
        return table.withLock { $0.inodes[wd] }
    }

    /// A directory's watch heard a close of `inode`, whose event ends at `endsAt` in the
    /// queue and read `st`.
    func heardByDirectory(_ inode: UInt64, _ st: stat, endsAt: UInt64) {
        guard size.load(ordering: .relaxed) > 0 else { return }
        table.withLock { t in
            guard let watch = t.watches[inode] else { return }
            t.watches[inode] = (watch.wd, Heard(st, endsAt: endsAt))
        }
    }

    /// Whether the file's own event of a close, queued at `queuedAt` and reading `st`, is
    /// the twin of the close a directory's watch heard just before.
    func isTwin(_ inode: UInt64, _ st: stat, queuedAt: UInt64) -> Bool {
        table.withLock { t in
            guard let watch = t.watches[inode], let heard = watch.heard else { return false }
            t.watches[inode] = (watch.wd, nil)
            return heard == Heard(st, endsAt: queuedAt)
        }
    }

    /// inotify ended the watch (IN_IGNORED: the file's last name went, or the watch gave
    /// way at the limit).
    func ended(_ wd: CInt) {
        guard size.load(ordering: .relaxed) > 0 else { return }
        table.withLock { t in
            guard let inode = t.inodes.removeValue(forKey: wd) else { return }
            t.watches[inode] = nil
            size.store(t.inodes.count, ordering: .relaxed)
        }
    }

    /// How many files are watched.
    var count: Int { size.load(ordering: .relaxed) }
}
