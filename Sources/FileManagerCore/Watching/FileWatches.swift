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
/// the daemon's unlink or rename). It outlives the kernel's hold on the file: under
/// `-o writeback` the watcher itself makes the kernel let go of a file changed in the
/// store, and the next look-up holds it again. A watch whose file the kernel no longer
/// holds ends at its next event, or when `limit` are taken and another is wanted; the
/// file's last name going ends it too (inotify's IN_IGNORED), so a watch keeps no
/// removed file alive.
///
/// A close through a name that is still there reaches both the directory's watch and the
/// file's, one after the other; the state each read is kept (`isNews`), so the second
/// finds nothing new rather than taking the daemon's own close for an outside one.
///
/// At most `limit` files are watched; a further one is heard as before (when its
/// attributes expire).
final class FileWatches: Sendable {
    /// How many files may be watched at once.
    let limit: Int
    /// Only closes of written files: a file's own watch also hears every change of its
    /// link count (IN_ATTRIB), the daemon's included, which its directories tell already.
    static let mask = UInt32(IN_CLOSE_WRITE)

    /// The store watcher's inotify descriptor; -1 until a watcher runs (nothing is watched).
    let descriptor = Atomic<CInt>(-1)

    /// What a file looked like at its last event: a later event finding the same was
    /// about nothing new. Every write and attribute change moves the ctime (echoes are
    /// told by it too, `OwnChanges`).
    private struct Seen: Equatable {
        let seconds: Int
        let nanoseconds: Int
        let size: Int

        init(_ st: stat) { (seconds, nanoseconds, size) = (st.st_ctim.tv_sec, st.st_ctim.tv_nsec, st.st_size) }
    }

    private struct Table {
        var inodes: [CInt: UInt64] = [:]
        var watches: [UInt64: (wd: CInt, seen: Seen?)] = [:]
    }
    private let table = Mutex(Table())
    /// `inodes.count`, read without the lock for every event and every final forgetting.
    private let size = Atomic<Int>(0)

    init(limit: Int = 1_024) { self.limit = limit }

    /// Watches the file `item` (a regular file), unless `limit` files are watched and none
    /// of them is one the kernel no longer holds (`isHeld`).
    func watch(_ item: Item, isHeld: (UInt64) -> Bool) {
        let inotify = descriptor.load(ordering: .acquiring)
        guard inotify >= 0, item.isRegularFile else { return }
        table.withLock { t in
            if t.watches[item.inode] == nil && t.inodes.count >= limit {
                for (inode, watch) in t.watches where !isHeld(inode) { end(watch.wd, of: inode, in: &t, inotify) }
                guard t.inodes.count < limit else { return }
            }
            // Not a path: the file's own descriptor, whatever its names are now. A file
            // watched already gets its watch back (the number may be another file's, if the
            // one watched went and its IN_IGNORED is not read yet).
            let wd = (try? Syscall.withProcPath(item.fd) { path throws(Errno) in
                clinux_inotify_add_watch(inotify, path, Self.mask)
            }) ?? -1
            guard wd >= 0 else { return }  // no read permission, no watches left: as before
            if let old = t.watches[item.inode], old.wd == wd { return }
            if let old = t.watches[item.inode] { t.inodes[old.wd] = nil }
            t.inodes[wd] = item.inode
            t.watches[item.inode] = (wd, nil)
            size.store(t.inodes.count, ordering: .relaxed)
        }
    }

    private func end(_ wd: CInt, of inode: UInt64, in t: inout Table, _ inotify: CInt) {
        t.inodes[wd] = nil
        t.watches[inode] = nil
        size.store(t.inodes.count, ordering: .relaxed)
        _ = clinux_inotify_rm_watch(inotify, wd)
    }

    /// The file a watch is of; nil for a directory's watch.
    func inode(of wd: CInt) -> UInt64? {
        guard size.load(ordering: .relaxed) > 0 else { return nil }
        return table.withLock { $0.inodes[wd] }
    }

    /// Whether `st`, read for an event of `inode`, differs from what the file's last event
    /// read (always, for a file not watched); records it.
    func isNews(_ inode: UInt64, _ st: stat) -> Bool {
        guard size.load(ordering: .relaxed) > 0 else { return true }
        let now = Seen(st)
        return table.withLock { t in
            guard let watch = t.watches[inode] else { return true }
            t.watches[inode] = (watch.wd, now)
            return watch.seen != now
        }
    }

    /// The kernel no longer holds the file: its watch ends.
    func end(_ inode: UInt64) {
        let inotify = descriptor.load(ordering: .acquiring)
        table.withLock { t in
            guard let watch = t.watches[inode] else { return }
            end(watch.wd, of: inode, in: &t, inotify)
        }
    }

    /// inotify ended the watch (IN_IGNORED: the file's last name went, or `end` removed it).
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
