import Glibc
import SystemPackage

/// One difference `snapshot diff` reports between a snapshot and its live source.
public struct SnapshotDifference: Sendable, Equatable {
    public enum Change: String, Sendable { case added, removed, changed }
    /// Below the compared item (`.` for the item itself), as text (`\xHH` for bytes that
    /// are not UTF-8).
    public var path: String
    public var change: Change
    /// For `changed`: which of type, size, mode, owner, mtime, xattrs, content (a link's
    /// destination counts as its content).
    public var what: [String]
}

/// `snapshot diff` (docs/DESIGN.md 55): the per-item form of `FileWrapper.matchesContents`.
/// The same things count (kind, data, link destination, children, mode, owner, group,
/// modification time, `user.*` attributes), and the live side is read as publish reads
/// it, so what publish leaves out is not reported as added.
extension Snapshots {
    /// Compares the item `snapshotName` of `snapshotDir` with `liveName` of `liveDir`, the
    /// live item at `source` (`containers/ID/…`, for publish's exclusions). `store`: the
    /// snapshot (`snapshot`) is read in the store, where its data may be linked; nil when
    /// it is read through the mount.
    public static func diff(snapshot snapshotDir: CInt, _ snapshotName: [UInt8], live liveDir: CInt, _ liveName: [UInt8],
                            source: String, display: String, liveDisplay: String,
                            store: Store? = nil, snapshot: String = "") throws(FileManagerError) -> [SnapshotDifference] {
        var reading = FileWrapper.ReadingOptions()
        if let data = store?.snapshotData {
            reading.linkedData = { entry in data.openLinked(snapshot: snapshot, entry: entry) }
        }
        let frozen = try FileWrapper(directory: snapshotDir, name: snapshotName, options: reading, display: display)
        let components = source.split(separator: "/").map(String.init)
        let live: FileWrapper
        do {
            live = try FileWrapper(directory: liveDir, name: liveName, options: FileWrapper.ReadingOptions(
                include: { path, st, fd in included(containerRelative(components, path), st, fd) }), display: liveDisplay)
        } catch {
            if case .invalidArgument(let m) = error, m.hasSuffix("left out of the reading") {
                throw .invalidArgument("\(liveDisplay): excluded from snapshots, nothing to compare with")
            }
            throw error
        }
        var result: [SnapshotDifference] = []
        compare(frozen, live, path: [], into: &result)
        return result
    }

    static func compare(_ old: FileWrapper, _ new: FileWrapper, path: [UInt8], into result: inout [SnapshotDifference]) {
        let shown = path.isEmpty ? "." : Bytes.display(path)
        guard old.kind == new.kind else {
            result.append(SnapshotDifference(path: shown, change: .changed, what: ["type"]))
            return
        }
        var what: [String] = []
        let (a, b) = (old.fileAttributes, new.fileAttributes)
        switch old.contents {
        case .file, .bytes:
            let (sa, sb) = (size(old), size(new))
            if sa != sb { what.append("size") }
        default: break
        }
        if a.mode != b.mode { what.append("mode") }
        if a.uid != b.uid || a.gid != b.gid { what.append("owner") }
        if a.modificationSeconds != b.modificationSeconds || a.modificationNanoseconds != b.modificationNanoseconds { what.append("mtime") }
        if a.extendedAttributes != b.extendedAttributes { what.append("xattrs") }
        switch old.kind {
        case .symbolicLink:
            if old.symbolicLinkDestination != new.symbolicLinkDestination { what.append("content") }
        case .regularFile:
            if !sameData(old, new) { what.append("content") }
        case .directory:
            break
        }
        if !what.isEmpty { result.append(SnapshotDifference(path: shown, change: .changed, what: what)) }
        guard let mine = old.childrenByName, let theirs = new.childrenByName else { return }
        let names = Set(mine.keys).union(theirs.keys).sorted { $0.lexicographicallyPrecedes($1) }
        for name in names {
            var childPath = path
            if !childPath.isEmpty { childPath.append(0x2F) }
            childPath.append(contentsOf: name)
            switch (mine[name], theirs[name]) {
            case (let o?, let n?): compare(o, n, path: childPath, into: &result)
            case (_?, nil): result.append(SnapshotDifference(path: Bytes.display(childPath), change: .removed, what: []))
            case (nil, _?): result.append(SnapshotDifference(path: Bytes.display(childPath), change: .added, what: []))
            default: break
            }
        }
    }

    static func size(_ w: FileWrapper) -> Int64? {
        switch w.contents {
        case .file(let s): return s.size
        case .bytes(let b): return Int64(b.count)
        default: return nil
        }
    }

    /// Whether two regular files hold the same bytes, read a block at a time side by side
    /// (a file that cannot be read counts as changed, as in `matchesContents`).
    static func sameData(_ a: FileWrapper, _ b: FileWrapper) -> Bool {
        guard case .file(let x) = a.contents, case .file(let y) = b.contents else { return a.sameContents(as: b) }
        guard x.size == y.size else { return false }
        guard let fa = try? x.open() else { return false }
        defer { Syscall.close(fa) }
        guard let fb = try? y.open() else { return false }
        defer { Syscall.close(fb) }
        let count = 1 << 16
        let p = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 4096)
        let q = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 4096)
        defer { p.deallocate(); q.deallocate() }
        var offset: off_t = 0
        while true {
            let n = pread(fa, p.baseAddress, count, offset)
            guard n >= 0 else { return false }
            var m = 0
            while m < n {
                let r = pread(fb, q.baseAddress! + m, n - m, offset + off_t(m))
                if r <= 0 { return false }
                m += r
            }
            if n == 0 { return pread(fb, q.baseAddress, 1, offset) == 0 }
            if memcmp(p.baseAddress!, q.baseAddress!, n) != 0 { return false }
            offset += off_t(n)
        }
    }
}
