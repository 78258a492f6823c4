@testable import FileManagerCore
import Foundation
import Glibc
import SystemPackage
import Testing

/// An item event the watcher reads after the daemon renamed or unlinked its name (DESIGN.md
/// 14, "Renamed or unlinked before the watcher read"): the watcher reads state by name, and the name is
/// gone or leads elsewhere by then.
@Suite("Events of names the daemon renamed away or unlinked")
struct RenamedAwayTests {
    typealias Fixture = StoreWatcherCatchUpTests.Fixture

    @Test func anEditBeforeTheRenameIsTheMovedItems() throws {
        let f = try Fixture()
        StoreWatcherCatchUpTests.overwrite(f.documentsPath + "/f", "edited in the store")   // queued, not read yet
        try f.rename("f", "g")                                      // through the mount, at once
        f.watcher.readQueue()
        #expect(f.observer.flush().contains("item \(f.file.inode)")) // lost before: "f" was gone
    }

    @Test func anEditBeforeAnUnlinkReachesTheFilesOtherName() throws {
        let f = try Fixture()
        #expect(link(f.documentsPath + "/f", f.documentsPath + "/g") == 0)
        f.watcher.readQueue()
        _ = f.observer.flush()
        StoreWatcherCatchUpTests.overwrite(f.documentsPath + "/f", "edited in the store")
        try withName("f") { try f.volume.unlink(f.documents, $0) }  // through the mount, at once
        f.watcher.readQueue()
        #expect(f.observer.flush().contains("item \(f.file.inode)")) // g is the file, edited
    }

    @Test func aRenameOntoAnEditedNameTellsNothingOfTheMovedItem() throws {
        let f = try Fixture()
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/g", contents: Data("g".utf8))
        f.watcher.readQueue()
        _ = f.observer.flush()
        StoreWatcherCatchUpTests.overwrite(f.documentsPath + "/g", "edited in the store")   // about the file the rename replaces
        try f.rename("f", "g")
        f.watcher.readQueue()
        #expect(!f.observer.flush().contains("item \(f.file.inode)"))
    }

    /// The rename replaces a name of a file the kernel holds under another name too: an
    /// edit made in the store under the replaced name, not yet read, is about that file,
    /// which stays (under writeback its other name kept the old size for good: found by a
    /// coherence fuzzer).
    @Test func anEditOfAReplacedNameReachesTheFilesOtherName() throws {
        let f = try Fixture()
        #expect(link(f.documentsPath + "/f", f.documentsPath + "/h") == 0)
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/g", contents: Data("g".utf8))
        _ = try withName("h") { try f.volume.lookup(f.documents, $0) }   // the kernel holds it under two names
        f.watcher.readQueue()
        _ = f.observer.flush()
        StoreWatcherCatchUpTests.overwrite(f.documentsPath + "/h", "edited in the store")
        try f.rename("g", "h")                                      // through the mount, at once
        f.watcher.readQueue()
        #expect(f.observer.flush().contains("item \(f.file.inode)"))  // lost before: "h" led to g
    }

    /// The kernel renames a name whose entry is stale: the store replaced the file (as an
    /// editor saves) before the watcher's news reached the kernel. The daemon moves what
    /// the name leads to now, an item the kernel does not hold, and the kernel moves its
    /// entry of the old item to the new name: that name must be looked up again (the old
    /// content stayed there for good: found by a coherence fuzzer).
    @Test func aRenameOfANameTheStoreReplacedTellsTheKernelOfTheNewName() throws {
        let f = try Fixture()
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/new", contents: Data("saved".utf8))
        #expect(Glibc.rename(f.documentsPath + "/new", f.documentsPath + "/f") == 0)   // the kernel still holds the old f
        try f.rename("f", "g")                                       // before the watcher read the replacement
        #expect(f.observer.flush().contains("entry g"))
    }

    /// The same when what the store renamed over the name is a file the kernel holds by
    /// another name: the kernel's entry of the name still leads to the old item, which it
    /// moves to the new name (a coherence fuzzer: 5 of 5 replays, the old content for good).
    @Test func aRenameOfANameTheStoreReplacedWithAHeldFileTellsTheKernelOfTheNewName() throws {
        let f = try Fixture()
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/x", contents: Data("x".utf8))
        _ = try withName("x") { try f.volume.lookup(f.documents, $0) }   // the kernel holds it as x
        #expect(Glibc.rename(f.documentsPath + "/x", f.documentsPath + "/f") == 0)   // and still the old f
        _ = f.observer.flush()
        try f.rename("f", "g")                                       // before the watcher read it
        #expect(f.observer.flush().contains("entry g"))
    }

    /// A rename of a name the item is known by tells the kernel nothing: its entry is right.
    @Test func aRenameOfTheKnownNameTellsNothing() throws {
        let f = try Fixture()
        _ = f.observer.flush()
        try f.rename("f", "g")
        #expect(!f.observer.flush().contains("entry g"))
    }

    /// The same with a name the mount gave the file (a hard link made through the mount):
    /// the store writes the file by that name, and the mount renames another file over it
    /// before the watcher read the write (a coherence fuzzer: the other name kept the old
    /// pages for good).
    @Test func anEditOfANameTheMountLinkedAndThenReplacedReachesTheFilesOtherName() throws {
        let f = try Fixture()
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/g", contents: Data("g".utf8))
        _ = try withName("g") { try f.volume.lookup(f.documents, $0) }
        _ = try withName("h") { try f.volume.link(f.file, f.documents, $0) }   // f and h: one file
        f.watcher.readQueue()
        _ = f.observer.flush()
        let fd = open(f.documentsPath + "/h", O_WRONLY)
        #expect(pwrite(fd, "edited", 6, 0) == 6)
        close(fd)
        try f.rename("g", "h")                                      // through the mount, at once
        f.watcher.readQueue()
        #expect(f.observer.flush().contains("item \(f.file.inode)"))
    }

    @Test func anEditAfterTheRenameIsAboutWhatTheNameLeadsToNow() throws {
        let f = try Fixture()
        try f.rename("f", "g")
        f.watcher.readQueue()
        _ = f.observer.flush()
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/f", contents: Data("a new f".utf8))
        f.watcher.readQueue()
        let told = f.observer.flush()
        #expect(!told.contains("item \(f.file.inode)"))
        let newInode = try Syscall.fstatat(AT_FDCWD, f.documentsPath + "/f").st_ino
        #expect(told.contains("item \(newInode)"))
    }
}

/// An item event whose name was renamed away in the store before the watcher read it
/// (`MovedBeforeRead`): the rename's IN_MOVED_TO names the item again.
@Suite("Item events of names renamed in the store before the watcher read them")
struct MovedBeforeReadTests {
    typealias Fixture = StoreWatcherCatchUpTests.Fixture

    @Test func anEditThenAnOutsideRenameIsTheItemsChange() throws {
        let f = try Fixture()
        StoreWatcherCatchUpTests.overwrite(f.documentsPath + "/f", "edited in the store")
        #expect(rename(f.documentsPath + "/f", f.documentsPath + "/g") == 0)   // before the watcher read the edit
        f.watcher.readQueue()
        #expect(f.observer.flush().contains("item \(f.file.inode)"))   // lost before: "f" led nowhere
    }

    @Test func anEditThenAnUnlinkTellsNothingLater() throws {
        let f = try Fixture()
        StoreWatcherCatchUpTests.overwrite(f.documentsPath + "/f", "edited in the store")
        #expect(unlink(f.documentsPath + "/f") == 0)
        f.watcher.readQueue()
        _ = f.observer.flush()
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/h", contents: Data("h".utf8))
        #expect(rename(f.documentsPath + "/h", f.documentsPath + "/g") == 0)
        f.watcher.readQueue()
        #expect(!f.observer.flush().contains("item \(f.file.inode)"))
    }

    @Test func theStateIsBounded() {
        var m = MovedBeforeRead()
        for i in 0..<(MovedBeforeRead.limit + 1) { m.lost(2, 7, FilePath.Component("n\(i)")!) }
        m.movedAway(7, "n0", cookie: 1)              // dropped with the rest at the limit
        #expect(m.arrived(cookie: 1) == nil)
        m.lost(8, 7, "a")
        m.replaced(7, "a")
        m.movedAway(7, "a", cookie: 2)
        #expect(m.arrived(cookie: 2) == nil)
        m.lost(8, 7, "b")
        m.movedAway(7, "b", cookie: 3)
        #expect(m.arrived(cookie: 3) == 8)
        #expect(m.arrived(cookie: 3) == nil)
    }
}
