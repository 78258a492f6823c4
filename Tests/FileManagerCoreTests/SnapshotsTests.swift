@testable import FileManagerCore
import Foundation
import Glibc
import SystemPackage
import Testing

/// Snapshots in the store, without a mount (docs/DESIGN.md 52): what a publish keeps and
/// leaves out, names, expiry, and the settling of a crash's journal rows.
@Suite("Snapshots")
struct SnapshotsTests {
    typealias Scratch = FileWrapperTests.Scratch

    func makeStore(_ s: Scratch) throws -> Store {
        let store = try Store(at: FilePath(s.path + "/store"))
        try ContainerRegistry(store: store).create(BundleIdentifier("com.example.unit")!, caller: .current) { _ in }
        let c = "store/containers/com.example.unit"
        s.write(c + "/Documents/a.txt", "alpha")
        s.write(c + "/tmp/t", "t")
        s.write(c + "/Library/Caches/c", "c")
        s.write(c + "/Documents/skip", "s")
        #expect(s.setXattr(c + "/Documents/skip", Snapshots.excludeAttribute, "1"))
        return store
    }

    func names(_ s: Scratch, _ relative: String) -> [String] {
        ((try? FileManager.default.subpathsOfDirectory(atPath: s.path + "/" + relative)) ?? []).sorted()
    }

    @Test func publishKeepsTheContainerButTheBundleTmpCachesAndExcludedItems() throws {
        let s = try Scratch()
        let store = try makeStore(s)
        let done = try Snapshots(store: store).publish("containers/com.example.unit", name: "one", caller: .current, now: 1_000)
        #expect(done.record.files == 1 && done.record.bytes == 5)
        #expect(names(s, "store/snapshots/one") == ["Documents", "Documents/Inbox", "Documents/a.txt", "Library",
                                                     "Library/Application Support", "Library/Preferences"])
        #expect(names(s, "store/.staging") == [])
        #expect(throws: FileManagerError.itemExists("snapshots/one")) {
            try Snapshots(store: store).publish("containers/com.example.unit", name: "one", caller: .current)
        }
    }

    @Test func defaultNamesSortAndStayUnique() throws {
        let s = try Scratch()
        let store = try makeStore(s)
        #expect(Snapshots.defaultName("com.example.unit", 1_796_622_780) == "com.example.unit-2026-12-07T05-53-00")
        let snapshots = Snapshots(store: store)
        let a = try snapshots.publish("containers/com.example.unit/Documents/a.txt", caller: .current, now: 1_796_622_780)
        let b = try snapshots.publish("containers/com.example.unit/Documents/a.txt", caller: .current, now: 1_796_622_780)
        #expect(a.record.name == "com.example.unit-2026-12-07T05-53-00")
        #expect(b.record.name == "com.example.unit-2026-12-07T05-53-00.2")
        #expect(contents(store, b.record.name, s.path + "/store/snapshots/" + b.record.name) == "alpha")
    }

    /// A snapshot file's data as the mount and export read it: its link, else its own.
    func contents(_ store: Store, _ snapshot: String, _ path: String) -> String? {
        let placeholder = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard placeholder >= 0, let st = try? Syscall.fstat(placeholder) else { return nil }
        defer { close(placeholder) }
        let fd = store.snapshotData.openLinked(snapshot: snapshot, entry: UInt64(st.st_ino)) ?? dup(placeholder)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = read(fd, &buffer, buffer.count)
        return n < 0 ? nil : String(decoding: buffer[0..<n], as: UTF8.self)
    }

    func stat(_ path: String) -> Glibc.stat? {
        var st = Glibc.stat()
        return lstat(path, &st) == 0 ? st : nil
    }

    /// Where extents cannot be shared (the suite's file systems), a publish links each file
    /// into `.snapshot-data/NAME/` beside a sparse placeholder and copies no data; the copy is
    /// made by `breakSharing`, before the live file changes; the table of shared files is
    /// found again at the next open; a removal takes the links with it.
    @Test func dataIsLinkedThenCopiedBeforeTheLiveFileChanges() throws {
        let s = try Scratch()
        let store = try makeStore(s)
        let livePath = s.path + "/store/containers/com.example.unit/Documents/a.txt"
        let done = try Snapshots(store: store).publish("containers/com.example.unit", name: "one", caller: .current)
        try #require(done.sharing == .linked, "the scratch file system shares extents: FICLONE, not links")
        let live = try #require(stat(livePath))
        let placeholder = try #require(stat(s.path + "/store/snapshots/one/Documents/a.txt"))
        #expect(live.st_nlink == 2 && placeholder.st_size == 5 && placeholder.st_blocks == 0)
        #expect(names(s, "store/.snapshot-data/one") == ["\(placeholder.st_ino)"])
        #expect(store.snapshotData.links(of: UInt64(live.st_ino)) == 1)

        _ = try Snapshots(store: store).publish("containers/com.example.unit/Documents/a.txt", name: "two", caller: .current)
        #expect(stat(livePath)?.st_nlink == 3)
        let reopened = try Store(at: FilePath(s.path + "/store"))
        reopened.snapshotData.load()
        #expect(reopened.snapshotData.links(of: UInt64(live.st_ino)) == 2)

        let fd = open(livePath, O_PATH | O_CLOEXEC)
        defer { close(fd) }
        try reopened.snapshotData.breakSharing(UInt64(live.st_ino), live: fd)
        #expect(stat(livePath)?.st_nlink == 1 && reopened.snapshotData.links(of: UInt64(live.st_ino)) == 0)
        s.write("store/containers/com.example.unit/Documents/a.txt", "beta")
        #expect(contents(reopened, "one", s.path + "/store/snapshots/one/Documents/a.txt") == "alpha")
        #expect(contents(reopened, "two", s.path + "/store/snapshots/two") == "alpha")

        try Snapshots(store: reopened).remove("two", caller: .current)
        #expect(names(s, "store/.snapshot-data") == ["one", "one/\(placeholder.st_ino)"])
    }

    @Test func expiredSnapshotsGoAtListAndAtTheNextOpen() throws {
        let s = try Scratch()
        let store = try makeStore(s)
        let snapshots = Snapshots(store: store)
        _ = try snapshots.publish("containers/com.example.unit", name: "short", expiresAfter: 10, caller: .current, now: 1_000)
        _ = try snapshots.publish("containers/com.example.unit", name: "long", expiresAfter: 100, caller: .current, now: 1_000)
        #expect(snapshots.list(now: 1_005).map(\.name) == ["long", "short"])
        #expect(snapshots.list(now: 1_010).map(\.name) == ["long"])
        #expect(names(s, "store/snapshots").contains("short") == false)
        Snapshots.recover(store, now: 1_200)
        #expect(snapshots.records(state: "published").isEmpty)
        #expect(names(s, "store/snapshots") == [])
    }

    @Test func aCrashIsSettledByTheRenameThatDecides() throws {
        let s = try Scratch()
        let store = try makeStore(s)
        let snapshots = Snapshots(store: store)
        _ = try snapshots.publish("containers/com.example.unit", name: "whole", caller: .current)
        _ = try snapshots.publish("containers/com.example.unit", name: "doomed", caller: .current)
        // A publish cut short after its rename, one before it, and a removal cut short.
        _ = try store.database.execute("UPDATE snapshots SET state = 'publishing' WHERE name = 'whole'")
        _ = try store.database.execute(
            "INSERT INTO snapshots (name, source, created, expires, files, bytes, owner_uid, state) VALUES ('half', 'containers/com.example.unit', 0, NULL, 0, 0, 0, 'publishing')")
        _ = try store.database.execute("UPDATE snapshots SET state = 'removing' WHERE name = 'doomed'")
        #expect(Snapshots.recover(store) == 3)
        #expect(snapshots.list().map(\.name) == ["whole"])
        #expect(names(s, "store/snapshots").filter { !$0.contains("/") } == ["whole"])
    }

    @Test func refusesSourcesOutsideContainersAndBadNames() throws {
        let s = try Scratch()
        let store = try makeStore(s)
        let snapshots = Snapshots(store: store)
        #expect(throws: FileManagerError.self) { try snapshots.publish("snapshots/x", caller: .current) }
        #expect(throws: FileManagerError.self) { try snapshots.publish("containers/com.example.unit/../x", caller: .current) }
        #expect(throws: FileManagerError.noSuchItem("containers/com.example.none")) {
            try snapshots.publish("containers/com.example.none", caller: .current)
        }
        #expect(throws: FileManagerError.self) { try snapshots.publish("containers/com.example.unit", name: ".hidden", caller: .current) }
        #expect(throws: FileManagerError.noSuchItem("snapshots/none")) { try snapshots.remove("none", caller: .current) }
    }
}
