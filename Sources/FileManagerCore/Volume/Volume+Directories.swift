import Glibc
import Synchronization
import SystemPackage

/// An open directory: a `getdents64` stream on the backing directory, or, for the virtual
/// root, the list of its entries taken at `opendir`.
///
/// Sendable note: the stream is touched only under `lock` (the kernel may send readdir for
/// one handle from several threads).
public final class DirectoryHandle: @unchecked Sendable {
    public let item: Item
    let lock = Mutex(())
    /// Opened at the first READDIR or FSYNCDIR, not at OPENDIR: a directory opened only to
    /// be held (`fchdir`, `openat` relative to it) or whose listing the kernel kept costs
    /// the daemon no descriptor besides its item's (DESIGN.md 28). `getdents64` reads the
    /// directory as it is when called, so the entries are as fresh either way.
    fileprivate var stream: DirectoryStream?
    /// The virtual root's entries: (name with NUL, inode, DT_ type).
    let synthetic: [([CChar], UInt64, UInt8)]
    /// `containers/`: only real directories are listed (a link or file planted there is
    /// no container, `Volume.isStray`).
    let listsOnlyDirectories: Bool

    init(item: Item, synthetic: [([CChar], UInt64, UInt8)] = [], listsOnlyDirectories: Bool = false) {
        self.item = item
        self.synthetic = synthetic
        self.listsOnlyDirectories = listsOnlyDirectories
    }
}

extension Volume {
    /// Opens `item` for listing. The root's entries are taken here: a client that counts
    /// changes of listings (`VolumeObserver.listingChanged`) counts before it opens.
    public func openDirectory(_ item: Item) throws(Errno) -> DirectoryHandle {
        guard item.isDirectory else { throw .notDirectory }
        let synthetic = item.isVirtual ? rootEntries() : []
        return DirectoryHandle(item: item, synthetic: synthetic, listsOnlyDirectories: zone(of: item) == .containers)
    }

    /// FSYNCDIR: the backing directory's entries to the disk (nothing for the virtual root).
    public func syncDirectory(_ handle: DirectoryHandle, dataOnly: Bool) throws(Errno) {
        guard !handle.item.isVirtual else { return }
        try handle.lock.withLock { _ throws(Errno) in
            try Syscall.fsync(try stream(of: handle).fd, dataOnly: dataOnly)
        }
    }

    /// The handle's stream, opened on first use; `handle.lock` held.
    private func stream(of handle: DirectoryHandle) throws(Errno) -> DirectoryStream {
        if let stream = handle.stream { return stream }
        let stream = try sheddingOnShortage { () throws(Errno) in
            try DirectoryStream.open(handle.item.fd, touchingAccessTime: true)
        }
        handle.stream = stream
        return stream
    }

    /// Asks the observers to drop what they cached of `item` (`VolumeObserver.itemChanged`: for
    /// a directory, the kernel's cached listing goes with it) and runs `then` once that is
    /// done: at once, on this thread, when no observer has anything pending.
    public func afterInvalidating(_ item: Item, then: @escaping @Sendable () -> Void) {
        notify { $0.itemChanged(item.inode) }
        if !afterObserversCaughtUp(with: item.inode, then) { then() }
    }

    /// The entries of the directory `inode` changed without the kernel seeing it (the store
    /// watcher found it, or the daemon made it for a CLI command). Told before the kernel is
    /// told of the change itself, so that an OPENDIR which caught up with that sees this too.
    public func listingChanged(_ inode: UInt64) {
        notify { $0.listingChanged(inode) }
    }


    /// The root lists `containers`, `snapshots` and every existing `.Trash-UID`.
    private func rootEntries() -> [([CChar], UInt64, UInt8)] {
        var entries: [([CChar], UInt64, UInt8)] = [
            (Array(".".utf8CString), Volume.rootInode, UInt8(DT_DIR)),
            (Array("..".utf8CString), Volume.rootInode, UInt8(DT_DIR)),
        ]
        for name in ["containers", "snapshots"] {
            if let st = try? Syscall.fstatat(store.rootFD, name) { entries.append((Array(name.utf8CString), UInt64(st.st_ino), UInt8(DT_DIR))) }
        }
        if let stream = try? DirectoryStream.open(store.trashFD), let names = try? stream.allNames() {
            for name in names.sorted(by: { $0.string < $1.string }) {
                let cName = name.withPlatformString { Array(UnsafeBufferPointer(start: $0, count: strlen($0) + 1)) }
                guard cName.withUnsafeBufferPointer({ Volume.trashOwner($0.baseAddress!) }) != nil,
                      let st = try? name.withName({ p throws(Errno) in try Syscall.fstatat(store.trashFD, p) })
                else { continue }
                entries.append((cName, UInt64(st.st_ino), UInt8(DT_DIR)))
            }
        }
        return entries
    }

    /// Hands entries to `accept` from the cookie `offset` on (0 = start), unfiltered: `.`,
    /// `..`, dot-files and `._*` included (`rm -r` needs them). `accept` returns false when
    /// it has no room; that entry is then returned first by the next call.
    public func readDirectory(_ handle: DirectoryHandle, from offset: Int64, _ accept: (DirectoryEntry) -> Bool) throws(Errno) {
        try handle.lock.withLock { _ throws(Errno) in
            guard !handle.item.isVirtual else {
                // Cookies are the indexes this loop handed out; the kernel refuses a negative
                // directory position, and an index must never trap if one came anyway.
                var index = Int(max(offset, 0))
                while index < handle.synthetic.count {
                    let (name, inode, type) = handle.synthetic[index]
                    let fits = name.withUnsafeBufferPointer { b in
                        accept(DirectoryEntry(inode: inode, nextOffset: Int64(index + 1), type: type, name: b.baseAddress!))
                    }
                    if !fits { return }
                    index += 1
                }
                return
            }
            let stream = try stream(of: handle)
            try stream.seek(to: offset)
            while true {
                let before = stream.position
                guard let entry = try stream.next() else { return }
                if handle.listsOnlyDirectories && !Volume.isDirectoryEntry(entry, in: stream.fd) { continue }
                if !accept(entry) {
                    try stream.rewind(to: before)
                    return
                }
            }
        }
    }
}

extension Volume {
    /// Whether a listed entry is a directory (asked of the file system when the listing
    /// does not say); one that vanished meanwhile is not.
    static func isDirectoryEntry(_ entry: DirectoryEntry, in dir: CInt) -> Bool {
        if entry.type != UInt8(DT_UNKNOWN) { return entry.type == UInt8(DT_DIR) }
        guard let st = try? Syscall.fstatat(dir, entry.name) else { return false }
        return (st.st_mode & S_IFMT) == S_IFDIR
    }
}

extension DirectoryStream {
    /// Seeks even when `position` already says `offset` (after a refused entry).
    func rewind(to offset: Int64) throws(Errno) {
        _ = try Syscall.lseek(fd, off_t(offset), SEEK_SET)
        resetBuffer(position: offset)
    }
}
