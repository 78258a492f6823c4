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
    let stream: DirectoryStream?
    /// The virtual root's entries: (name with NUL, inode, DT_ type).
    let synthetic: [([CChar], UInt64, UInt8)]

    init(item: Item, stream: DirectoryStream?, synthetic: [([CChar], UInt64, UInt8)] = []) {
        self.item = item
        self.stream = stream
        self.synthetic = synthetic
    }

    public func sync(dataOnly: Bool) throws(Errno) {
        if let stream { try Syscall.fsync(stream.fd, dataOnly: dataOnly) }
    }
}

extension Volume {
    public func openDirectory(_ item: Item) throws(Errno) -> DirectoryHandle {
        guard item.isDirectory else { throw .notDirectory }
        if item.isVirtual { return DirectoryHandle(item: item, stream: nil, synthetic: rootEntries()) }
        let stream = try sheddingOnShortage { () throws(Errno) in try DirectoryStream.open(item.fd, touchingAccessTime: true) }
        return DirectoryHandle(item: item, stream: stream)
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
            guard let stream = handle.stream else {
                var index = Int(offset)
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
            try stream.seek(to: offset)
            while true {
                let before = stream.position
                guard let entry = try stream.next() else { return }
                if !accept(entry) {
                    try stream.rewind(to: before)
                    return
                }
            }
        }
    }
}

extension DirectoryStream {
    /// Seeks even when `position` already says `offset` (after a refused entry).
    func rewind(to offset: Int64) throws(Errno) {
        _ = try Syscall.lseek(fd, off_t(offset), SEEK_SET)
        resetBuffer(position: offset)
    }
}
