import Glibc
import Synchronization
import SystemPackage

// MARK: - When descriptors run short (DESIGN.md 28)
//
// Every item the kernel holds keeps an `O_PATH` descriptor (decision 3), so the kernel's
// dentry cache, not the daemon, decides how many are open: 20,000 files looked up through
// the mount need 20,000 descriptors. The limit is lifted at start (to fs.nr_open where the
// daemon may, else the soft one to the hard one); past it, a lookup fails with EMFILE.
// Then the daemon asks the kernel to let go of cached entries of files nobody has open (as
// memory pressure would): the kernel drops them, forgets their inodes, and each FORGET
// closes a descriptor. A kernel that can prune (FUSE_NOTIFY_PRUNE, which drops an entry
// only while unused) is asked to let go of directories too, and the call tries again for
// up to 20 ms (`afterShedding`). Lookups, creates, opens and opendirs all shed. A request
// still short then fails (ENFILE to the caller); an entry it had already made is removed
// again, so the failed call leaves nothing behind.

extension Volume {
    static func isDescriptorShortage(_ error: Errno) -> Bool {
        error == .tooManyOpenFiles || error == .tooManyOpenFilesInSystem
    }

    /// Asks the observers (the kernel notifier) to drop the entries of up to an eighth of the
    /// items the kernel holds (at least 64), at most once per 100 ms. Only items the kernel
    /// can let go of without harm: an invalidated entry is unhashed even while in use, so
    /// without pruning a directory (maybe someone's working directory: `getcwd` would fail)
    /// or a file with open handles is never chosen; a pruned one is dropped only if unused,
    /// so with pruning directories are chosen too. Each round starts where the last one
    /// stopped.
    func shedDescriptors() {
        let now = MonotonicClock.now()
        let last = lastShedding.load(ordering: .relaxed)
        guard now &- last >= 100_000_000,
              lastShedding.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged else { return }
        let inodes = items.allInodes()
        guard !inodes.isEmpty else { return }
        let quota = max(64, inodes.count / 8)
        let pruning = observersCanLetGo
        var chosen: [UInt64] = []
        var looked = 0
        let start = sheddingCursor.load(ordering: .relaxed) % inodes.count
        while chosen.count < quota && looked < inodes.count {
            let inode = inodes[(start + looked) % inodes.count]
            looked += 1
            guard let item = items.item(inode), Volume.mayShed(item, pruning: pruning) else { continue }
            if pruning {
                chosen.append(inode)
            } else if let (parent, name) = item.placement {
                notify { $0.entryChanged(parent: parent, name: name) }
                chosen.append(inode)
            }
        }
        sheddingCursor.store(start + looked, ordering: .relaxed)
        if pruning && !chosen.isEmpty { notify { $0.letGo(chosen) } }
        logShortage(now: now, held: inodes.count, chosen: chosen.count, pruning: pruning)
    }

    /// Says that descriptors ran short, once a minute at most: an operator sees why calls
    /// failed with ENFILE.
    private func logShortage(now: UInt64, held: Int, chosen: Int, pruning: Bool) {
        let logged = lastSheddingLog.load(ordering: .relaxed)
        guard now &- logged >= 60_000_000_000,
              lastSheddingLog.compareExchange(expected: logged, desired: now, ordering: .relaxed).exchanged else { return }
        logger.warning("descriptors ran short (limit \(Syscall.descriptorLimit()), \(held) items held by the kernel): asked it to let go of \(chosen) \(pruning ? "unused items" : "files' entries") (logged once a minute at most)")
    }

    /// Whether the kernel may be asked to drop the item's entry to free its descriptor.
    static func mayShed(_ item: Item, pruning: Bool) -> Bool {
        !item.isVirtual && (pruning || !item.isDirectory) && item.openHandles.load(ordering: .relaxed) == 0
    }

    /// Runs `body`, which opens a descriptor; when there are none left, sheds (and, where
    /// the kernel prunes, tries again: `afterShedding`) before failing.
    func sheddingOnShortage<R>(_ body: () throws(Errno) -> R) throws(Errno) -> R {
        do {
            return try body()
        } catch {
            guard Volume.isDescriptorShortage(error) else { throw error }
            return try afterShedding(error, body)
        }
    }

    /// `body` met `shortage`: sheds, and where the kernel prunes, tries `body` again for up
    /// to 20 ms. A prune takes effect at once (the kernel forgets the items while the
    /// notifier writes it, and another thread's FORGETs close their descriptors), so the
    /// caller sees a short delay instead of ENFILE. A bounded wait in a rare state, not for
    /// a claim: on one CPU, or while the shortage lasts, the call still fails.
    func afterShedding<R>(_ shortage: Errno, _ body: () throws(Errno) -> R) throws(Errno) -> R {
        shedDescriptors()
        guard observersCanLetGo else { throw shortage }
        for _ in 0..<20 {
            usleep(1_000)
            do {
                return try body()
            } catch {
                guard Volume.isDescriptorShortage(error) else { throw error }
            }
        }
        throw shortage
    }

    /// What a failed call made, to undo exactly that: the inode it created (a file's, known
    /// from its descriptor; a link's, the item's), or only the kind of entry (mkdir, mknod,
    /// symlink: the name is checked a moment after the call, not at it).
    enum Made {
        case inode(UInt64)
        case kind(mode_t)

        func matches(_ st: stat) -> Bool {
            switch self {
            case .inode(let inode): UInt64(st.st_ino) == inode
            case .kind(let type): st.st_mode & S_IFMT == type
            }
        }
    }

    /// Undoes an entry this daemon just made when looking it up failed for want of
    /// descriptors. What is there now stays if it is not what the call made (a process
    /// writing the store replaced it meanwhile), or is a directory no longer empty, or
    /// `made` is nil; the kernel is then told the name exists (it cached it as missing
    /// before the call).
    func unmake(_ parent: Item, _ name: UnsafePointer<CChar>, _ made: Made?) {
        // The kernel saw the call fail, and the watcher takes both changes for the daemon's
        // own: a listing read meanwhile may have cached the name.
        listingChanged(parent.inode)
        if let made, let now = try? Syscall.fstatat(parent.fd, name), made.matches(now) {
            let flags = now.st_mode & S_IFMT == S_IFDIR ? AT_REMOVEDIR : 0
            let removed: Void? = try? Syscall.unlinkat(parent.fd, name, flags)
            if removed != nil { return }
        }
        guard let component = FilePath.Component(platformString: name) else { return }
        notify { $0.entryChanged(parent: parent.inode, name: component) }
    }
}
