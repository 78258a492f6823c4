import FileManagerCore
import Synchronization
import SystemPackage

/// The client's side of a volume in tests: keeps the items the volume hands out, with the
/// holds on them, as the FUSE bridge's node table does for the kernel.
final class Keeper: ItemKeeper {
    private let entries = Mutex<[UInt64: (item: Item, holds: UInt64)]>([:])

    func item(_ inode: UInt64) -> Item? { entries.withLock { $0[inode]?.item } }

    func hold(_ inode: UInt64, epoch: UInt64, make: () throws(Errno) -> Item) throws(Errno) -> (item: Item, isNew: Bool) {
        if let kept = entries.withLock({ table -> Item? in
            table[inode]?.holds += 1
            return table[inode]?.item
        }) { return (kept, false) }
        let fresh = try make()
        return entries.withLock { table in
            if let kept = table[inode] {
                table[inode]?.holds += 1
                return (kept.item, false)
            }
            table[inode] = (fresh, 1)
            return (fresh, true)
        }
    }

    func release(_ inode: UInt64, count: UInt64) {
        _ = entries.withLock { table -> Item? in
            guard let (item, holds) = table[inode] else { return nil }
            if holds > count { table[inode]?.holds = holds - count; return nil }
            table[inode] = nil
            item.wasLetGo()
            return item
        }
    }

    func allInodes() -> [UInt64] { entries.withLock { Array($0.keys) } }
}

extension Volume {
    /// A volume whose items a `Keeper` keeps.
    convenience init(store: Store, kernelCachesWrites: Bool = false) {
        self.init(store: store, keeper: Keeper(), kernelCachesWrites: kernelCachesWrites)
    }
}
