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
        #expect(s.read("store/snapshots/\(b.record.name)") == "alpha")
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
