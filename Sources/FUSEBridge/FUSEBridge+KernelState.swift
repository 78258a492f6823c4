import FileManagerCore
import SystemPackage

// What the kernel holds that the store no longer says: names it resolved that the store
// moved away, and (under writeback) inodes older than the file. Kept on the item's node
// (`NodeTable`); the core tells of the changes (`VolumeObserver`).

// MARK: - Kernel inodes older than the file (`-o writeback`, DESIGN.md 22)
//
// Under writeback the kernel keeps size, mtime and ctime of a file's inode itself and never
// takes the daemon's: once a file changed in the store, only a new inode shows the change.
// The watcher drops the entries of such a file and asks the kernel to let go of its inode
// (`Volume.markChangedOutside`); until the kernel did, a handle opened on the old inode is
// uncached (its reads end, and its appends land, at the store's end of file).

extension FUSEBridge {
    /// Whether the kernel's inode of this regular file may predate an edit made in the
    /// store: the file changed outside the mount since the kernel last made an inode for it
    /// (the first reference after it forgot the item, `NodeTable.View.madeAt`).
    func kernelMayHoldOldState(_ node: NodeTable.View) -> Bool {
        volume.kernelCachesWrites && node.item.isRegularFile && node.item.changedOutsideEpoch > node.madeAt
    }

    /// A look-up resolved `name` in `dir` to `item`. A file open through the mount (so the
    /// kernel holds an inode of it), with an inode that may predate an edit in the store:
    /// the kernel gives the name the old inode, with its old size. Its entry must go with
    /// the last handle, as the entry of the file's own name does (`handleReleased`); the
    /// name may be another than that one (renamed or linked in the store).
    func gaveName(_ name: UnsafePointer<CChar>, in dir: Item, to item: Item) {
        guard volume.kernelCachesWrites, item.isOpen, let view = nodes.view(item.inode), kernelMayHoldOldState(view),
              let component = FilePath.Component(platformString: name) else { return }
        if let (parent, known) = item.placement, parent == dir.inode, known == component { return }
        nodes.node(item.inode)?.namesGivenWhileStale.withLock { names in
            guard !names.contains(where: { $0.parent == dir.inode && $0.name == component }), names.count < 8 else { return }
            names.append((dir.inode, component))
        }
    }

    /// The kernel released a handle of `item`. If the kernel may still hold its inode of
    /// before an edit in the store: the entry the watcher dropped may be back, since a
    /// look-up made while the handle was open (a `stat`) found that very inode again; with
    /// the last handle gone, the entries go again, so that the inode can go and the next
    /// look-up makes a new one.
    func handleReleased(_ item: Item) {
        guard volume.kernelCachesWrites, !item.isOpen, let view = nodes.view(item.inode), kernelMayHoldOldState(view) else { return }
        let others: [(parent: UInt64, name: FilePath.Component)] = view.node?.namesGivenWhileStale.withLock { names in
            defer { names = [] }
            return names
        } ?? []
        if let (parent, name) = item.placement { volume.dropOldInode(parent: parent, name: name) }
        for (parent, name) in others { volume.dropOldInode(parent: parent, name: name) }
    }
}
