import Glibc
import SystemPackage

// MARK: - Where items are: paths relative to the mount, and identity chains
//
// Coordination and presenters speak of items by their place in the tree: a claim's target
// is the chain of inode numbers from the mount root (1) to the item, so ancestor checks are
// prefix checks; presenters register paths relative to the mount. Both are derived from
// the items' parent links, only when something is coordinated (never on the hot path).

extension Volume {
    /// The identity chain from the virtual root to `item`: `[1, …, item.inode]`.
    public func chain(of item: Item) -> [UInt64] {
        var result: [UInt64] = []
        var current: Item? = item
        while let i = current {
            result.append(i.inode)
            if i.isVirtual { break }
            current = i.state.withLock { $0.parent }
        }
        if result.last != Volume.rootInode { result.append(Volume.rootInode) }
        return result.reversed()
    }

    /// The item's path as seen from the mount root (`/containers/ID/Documents/a.txt`), from
    /// the names it was last seen under; nil for the root. Presenters and their events speak
    /// these paths.
    public func mountPath(of item: Item) -> FilePath? {
        var components: [FilePath.Component] = []
        var current: Item? = item
        while let i = current, !i.isVirtual {
            let (parent, name) = i.state.withLock { ($0.parent, $0.name) }
            guard let name else { return nil }
            components.append(name)
            current = parent
        }
        guard !components.isEmpty else { return nil }
        return FilePath(root: "/", components.reversed())
    }

    /// The mount path of `name` in `parent`.
    public func mountPath(of name: UnsafePointer<CChar>, in parent: Item) -> FilePath? {
        guard let component = FilePath.Component(platformString: name) else { return nil }
        guard let base = mountPath(of: parent) else { return FilePath(root: "/", [component]) }
        return base.appending(component)
    }

    /// Resolves a path relative to the mount to its identity chain without taking kernel
    /// references: for claims and presenters that name items by path (CLI, Swift API).
    /// The final component is not followed if it is a symlink. Missing trailing components
    /// are allowed (a presenter may wait for an item to appear): their chain ends at the
    /// deepest existing ancestor, and `exists` is false.
    public func resolve(_ path: FilePath) -> (chain: [UInt64], isDirectory: Bool, exists: Bool) {
        var chain: [UInt64] = [Volume.rootInode]
        var dir: CInt = -1
        defer { if dir >= 0 { Syscall.close(dir) } }
        var isDirectory = true
        for (index, component) in path.components.enumerated() {
            let opened: CInt?
            if index == 0 {
                opened = component.withPlatformString { name -> CInt? in
                    if strcmp(name, "containers") == 0 || strcmp(name, "snapshots") == 0 {
                        return try? Syscall.openat(store.rootFD, name, O_PATH | O_NOFOLLOW)
                    }
                    return Volume.trashOwner(name) != nil ? try? Syscall.openat(store.trashFD, name, O_PATH | O_NOFOLLOW) : nil
                }
            } else {
                opened = component.withPlatformString { try? Syscall.openat(dir, $0, O_PATH | O_NOFOLLOW) }
            }
            guard let fd = opened, let st = try? Syscall.fstat(fd) else { return (chain, isDirectory, false) }
            if dir >= 0 { Syscall.close(dir) }
            dir = fd
            chain.append(UInt64(st.st_ino))
            isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
            if !isDirectory && index < path.components.count - 1 { return (chain, false, false) }
        }
        return (chain, isDirectory, true)
    }
}
