import Synchronization

/// The items the store watcher lately found changed outside the mount (an edit, a change of
/// attributes, a directory's entries), in order, so that a look-up can tell whether the
/// state it read may predate one of them.
///
/// The watcher tells the kernel of a change only for items the daemon holds. A look-up that
/// read an item's state (`fstat`) just before an edit in the store, and made the item just
/// after the watcher handled that edit, would answer the kernel with the state of before,
/// and nobody would correct it (DESIGN.md 14). The look-up notes `sequence` before it
/// resolves the name and, once the item is in the table, asks `changed(_:since:)`: if the
/// watcher noted the item in between, it reads the state again. The watcher notes an item
/// before it looks for it in the table, and both sides go through the table's lock, so a
/// change is either seen by the look-up or told for the held item.
///
/// A ring of the last `capacity` inode numbers: a look-up that fell further behind reads
/// the state again without looking (the cost of being wrong is one `fstat`).
final class OutsideItemChanges: Sendable {
    static let capacity = 1024
    /// How many changes were noted, ever; the ring holds the last `capacity` of them.
    let sequence = Atomic<UInt64>(0)
    private let ring = Mutex<[UInt64]>(Array(repeating: 0, count: OutsideItemChanges.capacity))

    init() {}

    /// The watcher found `inode` changed outside the mount.
    func note(_ inode: UInt64) {
        ring.withLock { ring in
            let n = sequence.load(ordering: .relaxed)
            ring[Int(n % UInt64(Self.capacity))] = inode
            sequence.store(n &+ 1, ordering: .releasing)
        }
    }

    /// Every item may have changed (events lost): every look-up under way
    /// reads its state again.
    func noteEverything() {
        ring.withLock { _ in
            sequence.store(sequence.load(ordering: .relaxed) &+ UInt64(Self.capacity) &+ 1, ordering: .releasing)
        }
    }

    /// Whether `inode` was noted after `sequence` read `since`.
    func changed(_ inode: UInt64, since: UInt64) -> Bool {
        guard sequence.load(ordering: .acquiring) != since else { return false }
        return ring.withLock { ring in
            let now = sequence.load(ordering: .relaxed)
            if now &- since > UInt64(Self.capacity) { return true }
            var n = since
            while n != now {
                if ring[Int(n % UInt64(Self.capacity))] == inode { return true }
                n &+= 1
            }
            return false
        }
    }
}
