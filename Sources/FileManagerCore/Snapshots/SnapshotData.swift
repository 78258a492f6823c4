import CLinux
import Glibc
import Synchronization
import SystemPackage

/// File data a snapshot shares with live files where the store's file system cannot share
/// extents (ext4; docs/DESIGN.md 58). A snapshot's regular file is then a sparse placeholder
/// of the right size, with an inode, owner, mode, times and xattrs of its own, and
/// `STORE/.snapshot-data/NAME/N` is a hard link of the live file's inode, where N is the
/// placeholder's inode number. Publishing costs a link and a placeholder per file, whatever
/// the files' sizes.
///
/// The mount serves a placeholder's reads from its link (`openEntry`), never by passthrough.
/// Before the first change of a live file's data through the mount (an open for writing, a
/// truncation), `breakSharing` copies its data into a file of its own, renamed over every
/// link; snapshot handles open on the shared inode are moved onto the copy (`dup3` onto the
/// same descriptor number) in the same step. Changes of a live file's attributes need no
/// copy: the placeholder has its own.
///
/// Only the daemon keeps the table of shared inodes (`load` at mount); a CLI working on an
/// unmounted store has no writer to guard against.
public final class SnapshotData: @unchecked Sendable {
    public static let directoryName = ".snapshot-data"
    private let rootFD: CInt
    private let stagingFD: CInt

    struct Link: Equatable {
        let snapshot: String
        let entry: String
    }
    private struct Reader {
        let fd: CInt
        let link: Link
    }
    private struct State {
        var directory: CInt = -1
        /// Snapshot directories opened so far, by name.
        var snapshots: [String: CInt] = [:]
        /// Live inode → the links sharing its data.
        var shared: [UInt64: [Link]] = [:]
        /// Shared inode → snapshot handles reading it.
        var readers: [UInt64: [Reader]] = [:]
    }
    private let state = Mutex<State>(State())
    /// Taken around every copy and around every new link, so a writer's check and a
    /// publish's link cannot pass each other (`share`, `breakSharing`).
    private let copying = Mutex<Void>(())
    /// How many inodes are shared: 0 lets the mount's hot paths skip the table.
    private let sharedCount = Atomic<Int>(0)
    private let anyData = Atomic<Bool>(false)
    /// Whether any snapshot may hold data here: else a snapshot entry's open looks no
    /// further than its own file.
    public var holdsData: Bool { anyData.load(ordering: .acquiring) }
    /// Set by the volume: whether the mount has a live inode open for writing or is changing
    /// it right now. A file found so when published is copied at once. (An object, not a
    /// closure: a closure read out of a `Mutex` by `withLock` is written back wrapped in
    /// reabstraction thunks, one more layer per read.)
    public let writers = Mutex<(any SnapshotWriters)?>(nil)

    init(rootFD: CInt, stagingFD: CInt) {
        self.rootFD = rootFD
        self.stagingFD = stagingFD
    }

    deinit {
        state.withLock { s in
            for fd in s.snapshots.values { Syscall.close(fd) }
            if s.directory >= 0 { Syscall.close(s.directory) }
        }
    }

    // MARK: - Directories

    private func directory(_ s: inout State, create: Bool) throws(Errno) -> CInt {
        if s.directory >= 0 { return s.directory }
        if create {
            do { try Syscall.mkdirat(rootFD, SnapshotData.directoryName, 0o700) } catch .fileExists {}
        }
        s.directory = try Syscall.openat(rootFD, SnapshotData.directoryName, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        return s.directory
    }

    private func snapshotDirectory(_ s: inout State, _ name: String, create: Bool) throws(Errno) -> CInt {
        if let fd = s.snapshots[name] { return fd }
        let top = try directory(&s, create: create)
        if create {
            do { try Syscall.mkdirat(top, name, 0o700) } catch .fileExists {}
        }
        let fd = try Syscall.openat(top, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        s.snapshots[name] = fd
        return fd
    }

    // MARK: - Publishing

    /// Links the live file open as `live` as the data of the placeholder `entry` of
    /// `snapshot`; false when it cannot be linked (the caller copies). A file the mount is
    /// writing is copied at once after the link.
    func share(_ live: CInt, snapshot: String, entry: UInt64) throws(Errno) -> Bool {
        let link = Link(snapshot: snapshot, entry: String(entry))
        let inode = UInt64(try Syscall.fstat(live).st_ino)
        let linked = try copying.withLock { _ throws(Errno) -> Bool in
            try state.withLock { s throws(Errno) -> Bool in
                let dir = try snapshotDirectory(&s, snapshot, create: true)
                anyData.store(true, ordering: .releasing)
                do throws(Errno) { try Syscall.link(pathDescriptor: live, dir, link.entry) } catch {
                    // At the link limit, or a file the daemon may not link (protected_hardlinks).
                    switch error {
                    case .tooManyLinks, .notPermitted, .permissionDenied: return false
                    default: throw error
                    }
                }
                if s.shared[inode] == nil { sharedCount.add(1, ordering: .releasing) }
                s.shared[inode, default: []].append(link)
                return true
            }
        }
        if linked, writers.withLock({ $0?.isWriting(inode) ?? false }) {
            try breakSharing(inode, live: live)
        }
        return linked
    }

    /// Removes what `snapshot` holds (its removal, a failed publish): moved into `.staging/`
    /// in one rename, then deleted there unless `deferred` (a settling at mount: the daemon
    /// deletes staging debris once it serves).
    func remove(snapshot: String, deferred: Bool = false) {
        copying.withLock { _ in
            state.withLock { s in
                for (inode, links) in s.shared {
                    let kept = links.filter { $0.snapshot != snapshot }
                    guard kept.count != links.count else { continue }
                    if kept.isEmpty {
                        s.shared[inode] = nil
                        sharedCount.subtract(1, ordering: .releasing)
                    } else {
                        s.shared[inode] = kept
                    }
                }
                if let fd = s.snapshots.removeValue(forKey: snapshot) { Syscall.close(fd) }
                guard let top = try? directory(&s, create: false) else { return }
                discard(top, snapshot, deferred: deferred)
            }
        }
    }

    private func discard(_ top: CInt, _ snapshot: String, deferred: Bool) {
        let doomed = "removed-data.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        guard (try? Syscall.renameat2(top, snapshot, stagingFD, doomed, RENAME_NOREPLACE)) != nil else { return }
        if !deferred { FileWrapper.removeItem(stagingFD, Array(doomed.utf8)) }
    }

    /// Removes the data of snapshots not in `published`: a publish or a removal a crash
    /// cut short (settled with the store lock held, nothing served): moved into `.staging/`,
    /// whose debris goes once the mount is live.
    func removeData(except published: Set<String>) {
        state.withLock { s in
            guard let top = try? directory(&s, create: false),
                  let names = try? DirectoryStream.open(top).allNames() else { return }
            for name in names where !published.contains(name.string) {
                if let fd = s.snapshots.removeValue(forKey: name.string) { Syscall.close(fd) }
                discard(top, name.string, deferred: true)
            }
        }
    }

    /// Rebuilds the table of shared inodes from the links in the store (at mount, after
    /// `removeData`).
    public func load() {
        state.withLock { s in
            s.shared = [:]
            guard let top = try? directory(&s, create: false),
                  let names = try? DirectoryStream.open(top).allNames() else { return }
            if !names.isEmpty { anyData.store(true, ordering: .releasing) }
            for component in names {
                let name = component.string
                guard let dir = try? snapshotDirectory(&s, name, create: false),
                      let entries = try? DirectoryStream.open(dir).allNames() else { continue }
                for entry in entries {
                    let text = entry.string
                    guard UInt64(text) != nil else {  // a copy a crash cut short
                        entry.withPlatformString { FileWrapper.removeItem(dir, $0) }
                        continue
                    }
                    guard let st = try? Syscall.fstatat(dir, text), st.st_nlink > 1 else { continue }
                    s.shared[UInt64(st.st_ino), default: []].append(Link(snapshot: name, entry: text))
                }
            }
            sharedCount.store(s.shared.count, ordering: .releasing)
        }
    }

    // MARK: - The mount

    /// How many of a live file's links are snapshots' (the mount shows the others).
    public func links(of inode: UInt64) -> Int {
        guard sharedCount.load(ordering: .acquiring) > 0 else { return 0 }
        return state.withLock { $0.shared[inode]?.count ?? 0 }
    }

    /// Whether the live inode's data is shared with a snapshot.
    public func isShared(_ inode: UInt64) -> Bool { links(of: inode) > 0 }

    /// Gives the live inode open as `live` data of its own before it changes: copies it,
    /// renames the copy over every link, moves the snapshot handles reading the old inode
    /// onto the copy. Nothing to do (one load) when nothing is shared.
    public func breakSharing(_ inode: UInt64, live: CInt) throws(Errno) {
        guard sharedCount.load(ordering: .acquiring) > 0 else { return }
        try copying.withLock { _ throws(Errno) in
            guard let (first, firstDir) = state.withLock({ s -> (Link, CInt)? in
                guard let first = s.shared[inode]?.first, let dir = s.snapshots[first.snapshot] else { return nil }
                return (first, dir)
            }) else { return }
            let temporary = ".copy-\(inode)"
            _ = try? Syscall.unlinkat(firstDir, temporary, 0)
            let copy = try Syscall.openat(firstDir, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            defer { Syscall.close(copy) }
            do throws(Errno) {
                let source = try Syscall.reopen(live, O_RDONLY | O_CLOEXEC)
                defer { Syscall.close(source) }
                let st = try Syscall.fstat(source)
                if clinux_ficlone(copy, source) != 0 {
                    try TreeCopy.copyData(from: source, to: copy, size: Int(st.st_size))
                }
                // The modification time goes with the data (`snapshot verify` compares both).
                var times = (st.st_atim, st.st_mtim)
                _ = withUnsafePointer(to: &times) { futimens(copy, UnsafeRawPointer($0).assumingMemoryBound(to: timespec.self)) }
                try Syscall.fsync(copy, dataOnly: false)
            } catch {
                _ = try? Syscall.unlinkat(firstDir, temporary, 0)
                throw error
            }
            try state.withLock { s throws(Errno) in
                guard let links = s.shared[inode] else { return }
                try Syscall.renameat2(firstDir, temporary, firstDir, first.entry, 0)
                for link in links.dropFirst() {
                    guard let dir = try? snapshotDirectory(&s, link.snapshot, create: false) else { continue }
                    _ = try? Syscall.unlinkat(dir, temporary, 0)
                    try Syscall.linkat(firstDir, first.entry, dir, temporary, 0)
                    try Syscall.renameat2(dir, temporary, dir, link.entry, 0)
                }
                for reader in s.readers.removeValue(forKey: inode) ?? [] {
                    guard let dir = s.snapshots[reader.link.snapshot],
                          let fresh = try? Syscall.openat(dir, reader.link.entry, O_RDONLY | O_CLOEXEC) else { continue }
                    _ = clinux_dup3(fresh, reader.fd, O_CLOEXEC)
                    Syscall.close(fresh)
                }
                s.shared[inode] = nil
                sharedCount.subtract(1, ordering: .releasing)
            }
        }
    }

    /// Opens the data of the placeholder with inode `entry` in `snapshot` for reading: its
    /// link, or nil when it has none (its data is its own). A handle on a shared inode is
    /// recorded until `closed`, to be moved onto the copy when the live file changes.
    public func openEntry(snapshot: String, entry: UInt64) -> CInt? {
        state.withLock { s -> CInt? in
            guard let fd = openLink(&s, snapshot, entry) else { return nil }
            if let st = try? Syscall.fstat(fd), s.shared[UInt64(st.st_ino)] != nil {
                s.readers[UInt64(st.st_ino), default: []].append(Reader(fd: fd, link: Link(snapshot: snapshot, entry: String(entry))))
            }
            return fd
        }
    }

    /// The blocks the data of the placeholder `entry` of `snapshot` takes (its link's), for
    /// `du`; nil when it has no link.
    public func blocks(snapshot: String, entry: UInt64) -> blkcnt_t? {
        state.withLock { s -> blkcnt_t? in
            guard let dir = try? snapshotDirectory(&s, snapshot, create: false) else { return nil }
            return (try? Syscall.fstatat(dir, String(entry)))?.st_blocks
        }
    }

    /// A handle from `openEntry` is closing: forget it before its descriptor number can be
    /// reused.
    public func closed(_ fd: CInt) {
        state.withLock { s in
            for (inode, readers) in s.readers where readers.contains(where: { $0.fd == fd }) {
                let kept = readers.filter { $0.fd != fd }
                s.readers[inode] = kept.isEmpty ? nil : kept
            }
        }
    }

    /// The link holding the data of the placeholder `entry` of `snapshot`, opened for
    /// reading, for a reader in the store (export, diff, verify); nil when its data is its
    /// own.
    public func openLinked(snapshot: String, entry: UInt64) -> CInt? {
        state.withLock { openLink(&$0, snapshot, entry) }
    }

    private func openLink(_ s: inout State, _ snapshot: String, _ entry: UInt64) -> CInt? {
        guard let dir = try? snapshotDirectory(&s, snapshot, create: false) else { return nil }
        return try? Syscall.openat(dir, String(entry), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
    }
}

/// Who may be writing live files: the mount (`ItemTable`).
public protocol SnapshotWriters: AnyObject, Sendable {
    func isWriting(_ inode: UInt64) -> Bool
}
