import FileManagerCore
import SystemPackage

// What the kernel holds that the store no longer says: names it resolved that the store
// moved away, and (under writeback) inodes older than the file. Kept on the item's node
// (`NodeTable.Node`); the core tells of the changes (`VolumeObserver`).

// MARK: - Old names (DESIGN.md 27)

extension FUSEBridge {
    /// Whether the kernel may still reach `item` through a name it had in the store before
    /// a move there (`VolumeObserver.nameLeftBehind`).
    func mayBeReachedThroughOldName(_ node: NodeTable.Node) -> Bool {
        if node.oldNamesInKernel.load(ordering: .acquiring) > 0 { return true }
        let grace = node.oldNameGraceUntil.load(ordering: .relaxed)
        return grace != 0 && MonotonicClock.now() < grace
    }
}

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
    /// (the first reference after it forgot the item, `NodeTable.Node.madeAt`).
    func kernelMayHoldOldState(_ node: NodeTable.Node) -> Bool {
        volume.kernelCachesWrites && node.item.isRegularFile && node.item.changedOutsideEpoch > node.madeAt
    }

    /// A look-up resolved `name` in `dir` to the node `given` (`NodeTable.add`). A file the
    /// kernel held already (not new), with an
    /// inode that may predate an edit in the store, while a handle keeps that inode: the
    /// kernel gives the name the old inode, with its old size. Its entry must go with the
    /// last handle, as the entry of the file's own name does (`handleReleased`); the name
    /// may be another than that one (renamed or linked in the store).
    func gaveName(_ name: UnsafePointer<CChar>, in dir: Item, to given: (node: NodeTable.Node, isNew: Bool)) {
        let (node, item) = (given.node, given.node.item)
        guard !given.isNew, item.isOpen, kernelMayHoldOldState(node),
              let component = FilePath.Component(platformString: name) else { return }
        if let (parent, known) = item.placement, parent == dir.inode, known == component { return }
        node.namesGivenWhileStale.withLock { names in
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
        guard volume.kernelCachesWrites, !item.isOpen, let node = nodes.node(item.inode), kernelMayHoldOldState(node) else { return }
        let others = node.namesGivenWhileStale.withLock { names in
            defer { names = [] }
            return names
        }
        if let (parent, name) = item.placement { volume.dropOldInode(parent: parent, name: name) }
        for (parent, name) in others { volume.dropOldInode(parent: parent, name: name) }
    }
}
