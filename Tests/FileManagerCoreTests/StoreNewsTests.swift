@testable import FileManagerCore
import Foundation
import Glibc
import Synchronization
import SystemPackage
import Testing

/// What the volume does with news of the store (DESIGN.md 27): names replaced or moved
/// there, a look-up overtaken by the watcher, a file's other names, renames of stale
/// entries. No watcher runs: each test tells the volume what a watcher would have
/// (`Fixture.heard`), so only the volume's side is tested.
@Suite("The volume and news of the store")
struct StoreNewsTests {
    /// An observer that queues what it is told, as the kernel notifier does, until `flush`.
    final class QueueingObserver: VolumeObserver, Sendable {
        struct State {
            var queued: [(inode: UInt64?, what: String)] = []
            var told: [String] = []
            var waiting: [@Sendable () -> Void] = []
        }
        let state = Mutex(State())

        func entryChanged(parent: UInt64, name: FilePath.Component) { state.withLock { $0.queued.append((nil, "entry \(name)")) } }
        func itemChanged(_ inode: UInt64) { state.withLock { $0.queued.append((inode, "item \(inode)")) } }
        func entryChangedOutside(parent: UInt64, name: FilePath.Component) { state.withLock { $0.told.append("inline entry \(name)") } }
        func itemChangedOutside(_ inode: UInt64) { state.withLock { $0.told.append("inline item \(inode)") } }
        func nameLeftBehind(_ inode: UInt64, parent: UInt64, name: FilePath.Component) {
            state.withLock { $0.queued.append((nil, "left \(name)")) }
        }
        func hasPendingChanges(for inode: UInt64) -> Bool { state.withLock { $0.queued.contains { $0.inode == inode } } }
        func afterPendingChanges(for inode: UInt64, _ body: @escaping @Sendable () -> Void) -> Bool {
            state.withLock { s in
                guard s.queued.contains(where: { $0.inode == inode }) else { return false }
                s.waiting.append(body)
                return true
            }
        }

        /// Acts on everything queued, then lets the waiting go; returns what it acted on.
        func flush() -> [String] {
            let (acted, waiting) = state.withLock { s in
                defer { s.told += s.queued.map(\.what); s.queued = []; s.waiting = [] }
                return (s.queued.map(\.what), s.waiting)
            }
            waiting.forEach { $0() }
            return acted
        }
        var toldInline: [String] { state.withLock { $0.told.filter { $0.hasPrefix("inline") } } }
    }

    /// Rewrites a file in place (Foundation's `Data.write` replaces it by a rename).
    static func overwrite(_ path: String, _ text: String) {
        let fd = open(path, O_WRONLY | O_TRUNC)
        _ = text.withCString { write(fd, $0, strlen($0)) }
        close(fd)
    }

    func overwrite(_ path: String, _ text: String) { Self.overwrite(path, text) }

    struct Fixture {
        let t: TemporaryStore
        let volume: Volume
        let observer = QueueingObserver()
        let documents: Item
        let file: Item
        var documentsPath: String { t.storePath("containers/com.example.notes/Documents") }

        /// `writeback`: as under `-o writeback` (`Volume.kernelCachesWrites`).
        init(writeback: Bool = false) throws {
            t = try TemporaryStore()
            try ContainerRegistry(store: t.store).create(BundleIdentifier("com.example.notes")!, caller: .current)
            _ = FileManager.default.createFile(atPath: t.storePath("containers/com.example.notes/Documents/f"), contents: Data("old".utf8))
            let volume = Volume(store: t.store, kernelCachesWrites: writeback)
            let (containers, _) = try withName("containers") { try volume.lookup(volume.root, $0) }
            let (notes, _) = try withName("com.example.notes") { try volume.lookup(containers, $0) }
            let (documents, _) = try withName("Documents") { try volume.lookup(notes, $0) }
            (file, _) = try withName("f") { try volume.lookup(documents, $0) }
            self.volume = volume
            self.documents = documents
            volume.addObserver(observer)
        }

        /// What the watcher does when it hears that an entry was removed or renamed in the
        /// store: every item is due for a check of its name at its next open.
        func heard() {
            volume.items.outsideEntryEpoch.add(1, ordering: .releasing)
        }

        /// Renames `from` to `to` in Documents as the kernel's RENAME does.
        func rename(_ from: String, _ to: String) throws {
            try withName(from) { a in try withName(to) { b in try volume.rename(documents, a, documents, b, flags: 0) } }
        }
    }

    /// A look-up that read a file's state before an edit in the store, and made its item
    /// only after the watcher handled the edit (so the watcher told nobody: no item), answers
    /// the state after the edit (DESIGN.md 14, `OutsideItemChanges`).
    @Test func aLookUpOvertakenByTheWatcherReadsTheStateAgain() throws {
        let f = try Fixture()
        let inode = try withName("g") { [f] in
            _ = FileManager.default.createFile(atPath: f.documentsPath + "/g", contents: Data("old".utf8))
            return try f.volume.lookup(f.documents, $0).0.inode
        }
        f.volume.items.keeper.release(inode, count: 1)     // and the kernel let g go
        let since = f.volume.outsideItemChanges.sequence.load(ordering: .acquiring)  // a look-up begins...
        var before = stat()
        #expect(stat(f.documentsPath + "/g", &before) == 0)  // ...and reads g's state
        overwrite(f.documentsPath + "/g", "edited in the store")
        f.volume.outsideItemChanges.note(inode)              // the watcher handles the edit first
        #expect(f.volume.item(inode) == nil)
        let (made, _) = try withName("g") { try f.volume.lookup(f.documents, $0) }  // the look-up makes its item
        let answered = try f.volume.current(before, of: made, since: since)
        #expect(before.st_size == 3)
        #expect(answered.st_size == 19)
        // A look-up that began after the edit was handled keeps what it read.
        let later = f.volume.outsideItemChanges.sequence.load(ordering: .acquiring)
        #expect(try f.volume.current(before, of: made, since: later).st_size == 3)
    }

    @Test func aNameReplacedInTheStoreIsSeenUntilLookedUpAgain() throws {
        let f = try Fixture()
        let (other, _) = try withName("g") { [f] in
            _ = FileManager.default.createFile(atPath: f.documentsPath + "/g", contents: Data())
            return try f.volume.lookup(f.documents, $0)
        }
        #expect(!f.volume.wasReplacedInStore(f.file))        // no outside change: not even looked at
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/f.new", contents: Data("saved".utf8))
        #expect(rename(f.documentsPath + "/f.new", f.documentsPath + "/f") == 0)
        f.heard()
        #expect(f.volume.wasReplacedInStore(f.file))
        #expect(f.volume.wasReplacedInStore(f.file))         // every open, until the kernel looks again
        #expect(!f.volume.wasReplacedInStore(other))         // still where it was
        let (fresh, _) = try withName("f") { try f.volume.lookup(f.documents, $0) }
        #expect(fresh !== f.file && !f.volume.wasReplacedInStore(fresh))
        #expect(unlink(f.documentsPath + "/g") == 0)
        f.heard()
        #expect(f.volume.wasReplacedInStore(other))          // deleted
        #expect(!f.volume.wasReplacedInStore(fresh))
    }

    // MARK: - A file with several names (Volume+LinkNames)

    /// Makes `Documents/h` a second name of `f` through the volume, as the kernel's LINK does.
    func linked(_ f: Fixture) throws {
        let (item, _) = try withName("h") { try f.volume.link(f.file, f.documents, $0) }
        #expect(item === f.file)
        _ = f.observer.flush()
    }

    /// Some name removed in the store: every item is due for a check at its next open.
    func removeSomethingInStore(_ f: Fixture) {
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/x", contents: Data())
        #expect(unlink(f.documentsPath + "/x") == 0)
        f.heard()
    }

    func replaceInStore(_ f: Fixture, _ name: String) {
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/new", contents: Data("saved".utf8))
        #expect(rename(f.documentsPath + "/new", f.documentsPath + "/" + name) == 0)
        f.heard()
    }

    @Test func anotherNameReplacedInTheStoreIsSeenByAnOpen() throws {
        let f = try Fixture()
        try linked(f)
        replaceInStore(f, "h")                               // f still leads to the file
        #expect(f.volume.wasReplacedInStore(f.file))         // the open may have come through h
        #expect(f.observer.flush().contains("left h"))       // h goes from the kernel
        #expect(!f.volume.wasReplacedInStore(f.file))        // h is no longer its name
    }

    @Test func anotherNameMovedAwayInTheStoreIsSeenByAnOpen() throws {
        let f = try Fixture()
        try linked(f)
        #expect(rename(f.documentsPath + "/h", f.documentsPath + "/k") == 0)
        f.heard()
        #expect(f.volume.wasReplacedInStore(f.file))
        _ = f.observer.flush()
        #expect(!f.volume.wasReplacedInStore(f.file))
    }

    @Test func aLookUpOfALinkMadeInTheStoreRecordsTheName() throws {
        let f = try Fixture()
        #expect(link(f.documentsPath + "/f", f.documentsPath + "/h") == 0)
        let (item, _) = try withName("h") { try f.volume.lookup(f.documents, $0) }
        #expect(item === f.file)                             // known by f, and now by h
        _ = f.observer.flush()
        replaceInStore(f, "h")
        #expect(f.volume.wasReplacedInStore(f.file))
    }

    @Test func theKnownNameRemovedThroughTheMountHandsOverToAnother() throws {
        let f = try Fixture()
        try linked(f)
        try withName("f") { try f.volume.unlink(f.documents, $0) }
        removeSomethingInStore(f)
        _ = f.observer.flush()
        #expect(!f.volume.wasReplacedInStore(f.file))        // known by h now, which leads to it
        #expect(f.file.placement?.name == "h")
        replaceInStore(f, "h")
        #expect(f.volume.wasReplacedInStore(f.file))
    }

    @Test func anotherNameRenamedThroughTheMountIsFollowed() throws {
        let f = try Fixture()
        try linked(f)
        try f.rename("h", "k")                               // the kernel now holds f and k
        _ = f.observer.flush()
        #expect(f.file.placement?.name == "f")
        replaceInStore(f, "k")
        #expect(f.volume.wasReplacedInStore(f.file))
        _ = f.observer.flush()
        #expect(!f.volume.wasReplacedInStore(f.file))
        replaceInStore(f, "f")                               // and f is still checked
        #expect(f.volume.wasReplacedInStore(f.file))
    }

    @Test func anotherNameReplacedThroughTheMountIsNotChecked() throws {
        let f = try Fixture()
        try linked(f)
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/g", contents: Data())
        let (g, _) = try withName("g") { try f.volume.lookup(f.documents, $0) }
        try f.rename("g", "h")                               // h is g's now; the kernel knows
        _ = f.observer.flush()
        removeSomethingInStore(f)
        _ = f.observer.flush()
        #expect(!f.volume.wasReplacedInStore(f.file))        // no needless ESTALE for h
        #expect(!f.volume.wasReplacedInStore(g))
    }

    /// A removal or rename through the mount looks at the name it takes away only while the
    /// kernel holds a file with several names (`ItemTable.holdsLinkedFiles`).
    @Test func onlyFilesWithSeveralNamesAreCountedWhileHeld() throws {
        let f = try Fixture()
        #expect(!f.volume.items.holdsLinkedFiles)
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/g", contents: Data())
        let (g, _) = try withName("g") { try f.volume.lookup(f.documents, $0) }
        let (linked, _) = try withName("g2") { try f.volume.link(g, f.documents, $0) }
        #expect(linked === g)
        #expect(f.volume.items.holdsLinkedFiles)
        f.volume.items.keeper.release(g.inode, count: 2)   // the kernel forgot it
        #expect(!f.volume.items.holdsLinkedFiles)
    }

    /// Each item handed out is held once for the client; the keeper lets go of it with the
    /// last hold, and a failed call hands out nothing (`Volume.handingOut`).
    @Test func anItemIsKeptWhileTheClientHoldsIt() throws {
        let f = try Fixture()
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/g", contents: Data())
        let g = try withName("g") { try f.volume.lookup(f.documents, $0) }.0
        #expect(try withName("g") { try f.volume.lookup(f.documents, $0) }.0 === g)
        // An open of a file that exists after all, refused: no hold is left behind.
        chmod(f.documentsPath + "/g", 0)
        let stranger = Caller(uid: getuid() == 4242 ? 4343 : 4242, gid: 4242)
        #expect(errnoOf { _ = try withName("g") { try f.volume.create(f.documents, $0, mode: 0o644, flags: O_RDWR, caller: stranger) } } == .permissionDenied)
        f.volume.items.keeper.release(g.inode, count: 1)
        #expect(f.volume.item(g.inode) === g)
        f.volume.items.keeper.release(g.inode, count: 1)
        #expect(f.volume.item(g.inode) == nil)
        #expect(!f.volume.items.allInodes().contains(g.inode))
        #expect(f.volume.item(f.file.inode) === f.file)
    }

    // MARK: - Renames of stale entries (Volume.rename)

    /// A name renamed onto itself: the kernel asks only when its two look-ups of the name
    /// met different items, and moved its stale entry over the fresh one.
    @Test func aRenameOfANameOntoItselfTellsTheKernelToLookAgain() throws {
        let f = try Fixture()
        try f.rename("f", "f")
        #expect(f.observer.flush() == ["entry f"])
        #expect(FileManager.default.fileExists(atPath: f.documentsPath + "/f"))
    }

    /// The kernel renames a name whose entry is stale: the store replaced the file (as an
    /// editor saves) before the watcher's news reached the kernel. The daemon moves what
    /// the name leads to now, an item the kernel does not hold, and the kernel moves its
    /// entry of the old item to the new name: that name must be looked up again.
    @Test func aRenameOfANameTheStoreReplacedTellsTheKernelOfTheNewName() throws {
        let f = try Fixture()
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/new", contents: Data("saved".utf8))
        #expect(Glibc.rename(f.documentsPath + "/new", f.documentsPath + "/f") == 0)   // the kernel still holds the old f
        try f.rename("f", "g")
        #expect(f.observer.flush().contains("entry g"))
    }

    /// The same when what the store renamed over the name is a file the kernel holds by
    /// another name: the kernel's entry of the name still leads to the old item.
    @Test func aRenameOfANameTheStoreReplacedWithAHeldFileTellsTheKernelOfTheNewName() throws {
        let f = try Fixture()
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/x", contents: Data("x".utf8))
        _ = try withName("x") { try f.volume.lookup(f.documents, $0) }   // the kernel holds it as x
        #expect(Glibc.rename(f.documentsPath + "/x", f.documentsPath + "/f") == 0)   // and still the old f
        _ = f.observer.flush()
        try f.rename("f", "g")
        #expect(f.observer.flush().contains("entry g"))
    }

    /// A rename of a name the item is known by tells the kernel nothing: its entry is right.
    @Test func aRenameOfTheKnownNameTellsNothing() throws {
        let f = try Fixture()
        _ = f.observer.flush()
        try f.rename("f", "g")
        #expect(!f.observer.flush().contains("entry g"))
    }
}
