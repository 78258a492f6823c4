@testable import FileManagerCore
import Glibc
import Synchronization
import SystemPackage
import Testing

/// What the daemon does when descriptors run short (DESIGN.md 28), on a real store without
/// a mount: which items it asks the kernel to let go of, and what undoing a failed call
/// removes. (The shortage itself is exercised mounted, in `descriptors-run-short`.)
@Suite("Descriptors run short: shedding and undoing")
struct DescriptorShortageTests {
    /// Records the entries the volume asks its observers to invalidate.
    final class EntryRecorder: VolumeObserver, Sendable {
        let entries = Mutex<[String]>([])
        func entryChanged(parent: UInt64, name: FilePath.Component) { entries.withLock { $0.append(name.string) } }
        func itemChanged(_ inode: UInt64) {}
        var names: [String] { entries.withLock { $0.sorted() } }
    }

    /// A volume with a container's Documents looked up, and a recorder watching it.
    static func documents() throws -> (TemporaryStore, Volume, Item, EntryRecorder) {
        let t = try TemporaryStore()
        let volume = Volume(store: t.store)
        let (containers, _) = try withName("containers") { try volume.lookup(volume.root, $0) }
        let (notes, _) = try withName("com.example.notes") { try volume.mkdir(containers, $0, mode: 0o755, caller: .current) }
        let (documents, _) = try withName("Documents") { try volume.lookup(notes, $0) }
        let recorder = EntryRecorder()
        volume.addObserver(recorder)
        return (t, volume, documents, recorder)
    }

    @Test func sheddingSparesDirectoriesAndFilesInUse() throws {
        let (t, volume, documents, recorder) = try Self.documents()
        defer { withExtendedLifetime(t) {} }
        // What the kernel holds: the items it was given (the bridge's node table holds them).
        var kernel: [Item] = []
        for name in ["f1", "f2", "f3"] {
            // The handle closes at once: the file is held by the kernel only.
            kernel.append(try withName(name) { try volume.create(documents, $0, mode: 0o644, flags: O_WRONLY, caller: .current) }.0)
        }
        let (_, _, inUse) = try withName("open") { try volume.create(documents, $0, mode: 0o644, flags: O_WRONLY, caller: .current) }
        kernel.append(try withName("sub") { try volume.mkdir(documents, $0, mode: 0o755, caller: .current) }.0)
        volume.shedDescriptors()
        #expect(recorder.names == ["f1", "f2", "f3"])
        withExtendedLifetime((inUse, kernel)) {}
        // at most once per 100 ms
        volume.shedDescriptors()
        #expect(recorder.names == ["f1", "f2", "f3"])
    }

    /// Records the items a pruning observer (a kernel with FUSE_NOTIFY_PRUNE) is asked to let go of.
    final class Pruner: VolumeObserver, Sendable {
        let pruned = Mutex<[UInt64]>([])
        let entries = Mutex<Int>(0)
        var canLetGo: Bool { true }
        func letGo(_ inodes: [UInt64]) { pruned.withLock { $0 += inodes } }
        func entryChanged(parent: UInt64, name: FilePath.Component) { entries.withLock { $0 += 1 } }
        func itemChanged(_ inode: UInt64) {}
    }

    @Test func pruningLetsGoOfDirectoriesTooButNotOfOpenFiles() throws {
        let (t, volume, documents, recorder) = try Self.documents()
        defer { withExtendedLifetime(t) {} }
        let pruner = Pruner()
        volume.addObserver(pruner)
        let file = try withName("f") { try volume.create(documents, $0, mode: 0o644, flags: O_WRONLY, caller: .current) }.0
        let (_, _, inUse) = try withName("open") { try volume.create(documents, $0, mode: 0o644, flags: O_WRONLY, caller: .current) }
        let (sub, _) = try withName("sub") { try volume.mkdir(documents, $0, mode: 0o755, caller: .current) }
        volume.shedDescriptors()
        // Pruned (the kernel keeps what is in use), nothing invalidated: no entry is unhashed.
        let pruned = Set(pruner.pruned.withLock { $0 })
        #expect(pruned.isSuperset(of: [file.inode, sub.inode, documents.inode]))
        #expect(!pruned.contains(inUse.item.inode))
        #expect(!pruned.contains(volume.root.inode))
        #expect(recorder.names.isEmpty && pruner.entries.withLock { $0 } == 0)
        withExtendedLifetime(inUse) {}
    }

    @Test func undoingRemovesOnlyWhatTheCallMade() throws {
        let (t, volume, documents, recorder) = try Self.documents()
        defer { withExtendedLifetime(t) {} }
        let (item, _, handle) = try withName("made") { try volume.create(documents, $0, mode: 0o644, flags: O_WRONLY, caller: .current) }
        _ = handle
        // The name now leads elsewhere (replaced in the store): it stays, and the kernel,
        // which cached it as missing before the call, is told that it exists.
        withName("made") { volume.unmake(documents, $0, .inode(item.inode + 1)) }
        #expect(errnoOf { _ = try withName("made") { try Syscall.fstatat(documents.fd, $0) } } == nil)
        #expect(recorder.names == ["made"])
        // What the call made goes, silently (the kernel's negative entry is right).
        withName("made") { volume.unmake(documents, $0, .inode(item.inode)) }
        #expect(errnoOf { _ = try withName("made") { try Syscall.fstatat(documents.fd, $0) } } == .noSuchFileOrDirectory)
        #expect(recorder.names == ["made"])
    }

    @Test func undoingAMkdirLeavesADirectoryNoLongerEmpty() throws {
        let (t, volume, documents, recorder) = try Self.documents()
        defer { withExtendedLifetime(t) {} }
        let (dir, _) = try withName("d") { try volume.mkdir(documents, $0, mode: 0o755, caller: .current) }
        _ = try withName("inside") { try Syscall.mkdirat(dir.fd, $0, 0o755) }
        withName("d") { volume.unmake(documents, $0, .kind(S_IFDIR)) }
        #expect(errnoOf { _ = try withName("d") { try Syscall.fstatat(documents.fd, $0) } } == nil)
        #expect(recorder.names == ["d"])
        // A kept entry (a container) is only announced.
        withName("d") { volume.unmake(documents, $0, nil) }
        #expect(recorder.names == ["d", "d"])
    }
}
