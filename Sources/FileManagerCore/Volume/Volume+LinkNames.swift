import Glibc
import SystemPackage

// MARK: - The kernel's other names of a file with several (hard links)
//
// An item records the name it was last seen under, and an OPEN checks that this name
// still leads to it (`wasReplacedInStore`). The kernel may hold entries of a file's other
// names too: a link made through the mount, a look-up of a link made in the store. An
// OPEN carries only the inode, so one through such a name that the store has since moved
// away, or renamed another file over, would reach the file and be served the old content
// until the watcher's invalidation of the name reached the kernel. The other names are therefore recorded on the item and checked by an open as its name
// is (DESIGN.md 27, "Other names"). Only files whose link count is above one pay: a look-up
// of one of their names takes the item's lock and compares names.

extension Volume {
    /// A look-up resolved `name` in `parent` to `item`, which has more than one name: if it
    /// is not the name the item is known by, it is one of the other names the kernel holds.
    func noteOtherName(_ item: Item, _ parent: Item, _ name: UnsafePointer<CChar>) {
        guard let component = FilePath.Component(platformString: name) else { return }
        item.state.withLock { s in
            let known = s.otherNameIndex(parent, component)
            if s.parent === parent && s.name == component {
                if let known { s.otherNames.remove(at: known) }  // the item followed it here
                return
            }
            if known == nil && s.otherNames.count < Item.otherNamesLimit { s.otherNames.append((parent, component)) }
        }
    }

    /// Whether one of `names`, other names the kernel holds of `item`, no longer leads to
    /// it in the store (moved away, removed, or another file renamed over it). Each such
    /// name is no longer recorded, and its entry is dropped like an old name a look-up left
    /// behind (`nameLeftBehind`): an OPEN meanwhile may have come through it.
    func otherNameWentInStore(_ item: Item, _ names: [(parent: Item, name: FilePath.Component)]) -> Bool {
        var went = false
        for (parent, name) in names where !leadsTo(item, parent, name) {
            let recorded = item.state.withLock { s in
                guard let i = s.otherNameIndex(parent, name) else { return false }
                s.otherNames.remove(at: i)
                return true
            }
            went = true
            guard recorded else { continue }  // another open took it meanwhile
            nameLeftBehind(item, parent: parent.inode, name: name)
        }
        return went
    }

    /// Whether `name` in `parent` still leads to `item`: false only when the store says
    /// otherwise (another inode, or ENOENT); an error that tells nothing leaves it.
    func leadsTo(_ item: Item, _ parent: Item, _ name: FilePath.Component) -> Bool {
        do {
            let st = try name.withName { p throws(Errno) in try Syscall.fstatat(parent.fd, p) }
            return UInt64(st.st_ino) == item.inode
        } catch {
            return error != .noSuchFileOrDirectory
        }
    }

    /// The mount removed `name` in `parent`, one of `item`'s names (an unlink, or a rename
    /// over it): the kernel dropped its entry itself. The item stops checking it; if it was
    /// the name the item is known by, the item is known by one of its other names.
    func nameRemovedThroughMount(_ item: Item, _ parent: Item, _ name: UnsafePointer<CChar>) {
        guard let component = FilePath.Component(platformString: name) else { return }
        let promoted = item.state.withLock { s -> (parent: Item, name: FilePath.Component)? in
            if let i = s.otherNameIndex(parent, component) {
                s.otherNames.remove(at: i)
                return nil
            }
            guard s.parent === parent, s.name == component, !s.otherNames.isEmpty else { return nil }
            return s.otherNames.removeFirst()
        }
        guard let promoted else { return }
        try? promoted.name.withName { p throws(Errno) in relocate(item, to: promoted.parent, name: p) }
    }

    /// The mount renamed `name` in `parent` to `newName` in `newParent`: if that was one of
    /// `item`'s other names, the other name moves and the item stays known by its own
    /// (true); false when it was not one.
    func renamedOtherName(_ item: Item, from parent: Item, _ name: UnsafePointer<CChar>,
                          to newParent: Item, _ newName: UnsafePointer<CChar>) -> Bool {
        guard let component = FilePath.Component(platformString: name),
              let newComponent = FilePath.Component(platformString: newName) else { return false }
        return item.state.withLock { s in
            guard let i = s.otherNameIndex(parent, component) else { return false }
            s.otherNames[i] = (newParent, newComponent)
            return true
        }
    }
}
