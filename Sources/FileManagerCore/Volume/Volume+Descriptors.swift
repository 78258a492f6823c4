import Glibc
import Synchronization
import SystemPackage

// MARK: - When descriptors run short (DESIGN.md 28)
//
// Every item the kernel holds keeps an `O_PATH` descriptor (decision 3), so the kernel's
// dentry cache, not the daemon, decides how many are open: 20,000 files looked up through
// the mount need 20,000 descriptors. The limit is raised to the hard limit at start; past
// it, a lookup fails with EMFILE. Then the daemon asks the kernel to let go of cached
// entries (as memory pressure would): the kernel drops the unused ones, forgets their
// inodes, and each FORGET closes a descriptor. Lookups, opens and opendirs all shed. The
// failing request itself answers EMFILE (no worker waits); an entry it had already made is
// removed again, so the failed call leaves nothing behind.

extension Volume {
    static func isDescriptorShortage(_ error: Errno) -> Bool {
        error == .tooManyOpenFiles || error == .tooManyOpenFilesInSystem
    }

    /// Asks the observers (the kernel notifier) to invalidate the entries of up to an eighth
    /// of the items the kernel holds, at most once per 100 ms.
    func shedDescriptors() {
        let now = OwnChanges.now()
        let last = lastShedding.load(ordering: .relaxed)
        guard now &- last >= 100_000_000,
              lastShedding.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged else { return }
        let inodes = items.allInodes()
        var told = 0
        for inode in inodes where told < max(64, inodes.count / 8) {
            guard let item = items.item(inode), !item.isVirtual, let (parent, name) = item.placement else { continue }
            notify { $0.entryChanged(parent: parent, name: name) }
            told += 1
        }
    }

    /// Runs `body`, which opens a descriptor; when there are none left, sheds before failing.
    func sheddingOnShortage<R>(_ body: () throws(Errno) -> R) throws(Errno) -> R {
        do {
            return try body()
        } catch {
            if Volume.isDescriptorShortage(error) { shedDescriptors() }
            throw error
        }
    }

    /// Undoes an entry this daemon just made when looking it up failed for want of
    /// descriptors; `directory`: it was made by mkdir.
    func unmake(_ parent: Item, _ name: UnsafePointer<CChar>, directory: Bool) {
        try? ownChanges.expectingEntry(parent.inode, name) { () throws(Errno) in
            try Syscall.unlinkat(parent.fd, name, directory ? AT_REMOVEDIR : 0)
        }
    }
}
