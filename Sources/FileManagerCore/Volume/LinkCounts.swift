import Glibc
import Synchronization

/// The link counts the kernel was last told for the files it holds under more than one
/// name (DESIGN.md 14, "Hard links").
///
/// A link made or removed in the store changes the file's link count, and inotify tells
/// only watches of the file itself: its directories hear of the name (IN_CREATE,
/// IN_DELETE, IN_MOVED_TO over it), never of the count, and a removed name no longer says
/// which inode it led to. So the count is checked where it can have moved: a name made in
/// the store is looked at, and after a name was removed or replaced in the store, every
/// file recorded here is (`changed`, once per gulp of events).
///
/// At most `limit` files are recorded (each costs an `fstat` per such check); beyond that
/// a further hard-linked file's count is seen only once its attributes expire.
public final class LinkCounts: Sendable {
    static let limit = 1_024
    private let counts = Mutex<[UInt64: UInt64]>([:])
    /// `counts.count`, read without the lock by every final forgetting.
    private let size = Atomic<Int>(0)

    init() {}

    /// Records what the kernel is about to be told of a non-directory: nothing to keep for
    /// a file with one name, which only a link made in the store can give another.
    @inline(__always)
    func note(_ inode: UInt64, _ st: stat) {
        guard st.st_nlink > 1, st.st_mode & S_IFMT != S_IFDIR else { return }
        record(inode, UInt64(st.st_nlink))
    }

    private func record(_ inode: UInt64, _ links: UInt64) {
        counts.withLock { c in
            if c[inode] == links { return }
            if c[inode] == nil && c.count >= Self.limit { return }
            c[inode] = links
            size.store(c.count, ordering: .relaxed)
        }
    }

    /// The kernel forgot the item.
    func forget(_ inode: UInt64) {
        guard size.load(ordering: .relaxed) > 0 else { return }
        set(inode, nil)
    }

    private func set(_ inode: UInt64, _ links: UInt64?) {
        counts.withLock { c in
            c[inode] = links
            size.store(c.count, ordering: .relaxed)
        }
    }

    /// The recorded files whose link count is no longer what was recorded (their new
    /// count is recorded), each with whether it fell with a name left: a name of the file
    /// went and another stays.
    func changed(in items: ItemTable) -> [(inode: UInt64, fell: Bool)] {
        var moved: [(inode: UInt64, fell: Bool)] = []
        for (inode, links) in counts.withLock({ Array($0) }) {
            guard let item = items.item(inode), let st = try? Syscall.fstat(item.fd) else {
                set(inode, nil)
                continue
            }
            guard UInt64(st.st_nlink) != links else { continue }
            moved.append((inode, UInt64(st.st_nlink) < links && st.st_nlink > 0))
            set(inode, st.st_nlink > 1 ? UInt64(st.st_nlink) : nil)
        }
        return moved
    }

    /// How many files are recorded (none: no held file has other names, which a rename
    /// onto one of its names would leave in place).
    var count: Int { size.load(ordering: .relaxed) }
}
