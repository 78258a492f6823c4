@testable import FileManagerCore
import Foundation
import Glibc
import Synchronization
import SystemPackage
import Testing

/// A change the daemon makes whose echo never comes (DESIGN.md 14, "An echo that never
/// comes"): a rename of a name onto itself, or onto another name of the same file, changes
/// nothing in the store and queues no event. Its expectations once stayed for their second
/// and took the next outside change of those names for the echo: an outside unlink so
/// handled left the name in the mount for good (found by a coherence fuzzer).
@Suite("Expectations whose echo never comes")
struct UnmetEchoTests {
    typealias Fixture = StoreWatcherCatchUpTests.Fixture

    /// Documents/f and g made one file in the store, then f renamed onto g through the
    /// mount, which does nothing (POSIX) and queues nothing.
    private static func renamedOntoAnotherNameOfTheFile() throws -> Fixture {
        let f = try Fixture()
        #expect(link(f.documentsPath + "/f", f.documentsPath + "/g") == 0)
        f.watcher.readQueue()
        _ = f.observer.flush()
        try f.rename("f", "g")
        return f
    }

    @Test func aRenameOfANameOntoItselfTellsTheKernelToLookAgain() throws {
        let f = try Fixture()
        try f.rename("f", "f")
        // The kernel moved its stale entry over the fresh one: it must look the name up.
        #expect(f.observer.flush() == ["entry f"])
        #expect(FileManager.default.fileExists(atPath: f.documentsPath + "/f"))
    }

    @Test func anOutsideUnlinkRightAfterARenameOntoItselfIsTold() throws {
        let f = try Fixture()
        try f.rename("f", "f")
        f.watcher.readQueue()
        _ = f.observer.flush()
        #expect(unlink(f.documentsPath + "/f") == 0)   // in the store, within the second
        f.watcher.readQueue()
        #expect(f.observer.flush().contains("entry f"))  // taken for the rename's echo before
    }

    @Test func anOutsideUnlinkRightAfterARenameOntoAnotherNameOfTheFileIsTold() throws {
        let f = try Self.renamedOntoAnotherNameOfTheFile()
        #expect(FileManager.default.fileExists(atPath: f.documentsPath + "/f"))
        f.watcher.readQueue()
        _ = f.observer.flush()
        #expect(unlink(f.documentsPath + "/g") == 0)
        #expect(unlink(f.documentsPath + "/f") == 0)
        f.watcher.readQueue()
        let told = f.observer.flush()
        #expect(told.contains("entry g"))
        #expect(told.contains("entry f"))
    }

    /// The same, read only after an unlink through the mount of the rename's source and
    /// an outside creation of that name: the unlink's echo is its own, and the creation is
    /// told (a coherence fuzzer: the name stayed missing from the mount for good).
    @Test func anOutsideCreationAfterANoOpRenameAndAnUnlinkIsTold() throws {
        let f = try Self.renamedOntoAnotherNameOfTheFile()
        try withName("f") { try f.volume.unlink(f.documents, $0) }
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/f", contents: Data("new".utf8))
        f.watcher.readQueue()
        #expect(f.observer.flush().contains("entry f"))
    }

    /// A writer in the store wrote, then the daemon opened the file for writing (recording
    /// the state that write left) and closed it, then the writer closed: its close came
    /// after the daemon's, in the state the daemon recorded, and was taken for the daemon's
    /// echo; the mount kept the pages of before the write (coherence fuzzer, 10 of 10).
    @Test func anOutsideWritersCloseAfterTheDaemonsCloseIsTold() throws {
        let f = try Fixture()
        let writer = open(f.documentsPath + "/f", O_WRONLY)
        #expect(writer >= 0)
        #expect(try f.writerClosesAfterTheDaemon(writer).contains("item \(f.file.inode)"))
    }

    /// `rmdir d` in the store, then through the mount at once: the outside IN_DELETE was read
    /// while the daemon's own rmdir was in flight and taken for its echo; that rmdir failed
    /// (ENOENT) and queued nothing, and the kernel kept `d` for good (a coherence fuzzer).
    @Test func anOutsideChangeTakenForAFailedChangesEchoIsTold() {
        let own = OwnChanges()
        own.enabled.store(true, ordering: .relaxed)
        let told = Mutex<[String]>([])
        own.mistakenEcho.withLock { $0 = OwnChanges.MistakenEcho { _, name in told.withLock { $0.append("\(name)") } } }
        let failed = "d".withCString { d in
            Result { () throws(Errno) in
                try own.expectingEntry(7, d, removing: true) { () throws(Errno) in
                    #expect(own.isOwnEntry(7, "d", queuedAt: 5))   // the outside IN_DELETE, read meanwhile
                    throw Errno.noSuchFileOrDirectory
                }
            }
        }
        #expect(throws: Errno.noSuchFileOrDirectory) { try failed.get() }
        #expect(told.withLock { $0 } == ["d"])
        // A failed change whose expectation nothing took tells nothing.
        _ = "e".withCString { e in Result { () throws(Errno) in try own.expectingEntry(7, e) { () throws(Errno) in throw Errno.fileExists } } }
        #expect(told.withLock { $0 } == ["d"])
    }

    /// The bound itself: an echo queued before the change returned is the daemon's; an
    /// event queued after it is not, and the spent expectation goes.
    @Test func anExpectationEndsAtThePositionItsChangeReturnedAt() {
        let own = OwnChanges()
        own.enabled.store(true, ordering: .relaxed)
        let name: FilePath.Component = "h"
        "h".withCString { own.expectEntry(7, $0) }
        #expect(own.isOwnEntry(7, name, queuedAt: 1 << 40))   // in flight: any position
        "h".withCString { own.expectEntry(7, $0) }
        "h".withCString { own.entryChanged(7, $0, bounded: true) }  // returned at position 0 (no queue)
        #expect(!own.isOwnEntry(7, name, queuedAt: 0))
        #expect(!own.isOwnEntry(7, name, queuedAt: 0))          // dropped, not kept for later
        #expect(!own.expectsEntries)
        "h".withCString { own.expectEntry(7, $0) }
        "h".withCString { own.entryChanged(7, $0, bounded: false) }  // an echo that is certain: time bounds it
        #expect(own.isOwnEntry(7, name, queuedAt: 1 << 40))
    }

    /// A change made in a directory before its watch began queued no echo on it (a directory
    /// made through the mount is watched once the watcher reads its creation): its
    /// expectation takes no later event of the name, or the store's next change of it was
    /// the daemon's own and the kernel kept the old file (DESIGN.md 14, "Watched late").
    @Test func aChangeMadeBeforeTheWatchBeganTakesNoEventOfIt() {
        let own = OwnChanges()
        own.enabled.store(true, ordering: .relaxed)
        let name: FilePath.Component = "f6"
        "f6".withCString { n in own.expectingEntry(7, n) { () in } }          // made, unwatched
        let watchBegan = OwnChanges.now()
        #expect(!own.isOwnEntry(7, name, queuedAt: 1 << 40, watchedSince: watchBegan))
        #expect(!own.expectsEntries)                                          // dropped
        // Made once the watch began: its echo.
        "f6".withCString { n in own.expectingEntry(7, n) { () in } }
        #expect(own.isOwnEntry(7, name, queuedAt: 1 << 40, watchedSince: watchBegan))
        // Begun before the watch began and still in its system call: whether it echoes
        // is not known, and an echo taken for an outside change costs only an invalidation.
        "f6".withCString { own.expectEntry(7, $0) }
        let laterWatch = OwnChanges.now()
        #expect(!own.isOwnEntry(7, name, queuedAt: 1 << 41, watchedSince: laterWatch))
    }

    /// A new directory's listing finds what the mount made in it. A subdirectory made once
    /// the watch was in place echoes on it: its expectation stays for that echo, or the echo
    /// was an outside change whose invalidation unhashed a process's working directory
    /// (`mkdir -p a/b/c; cd a/b/c`, then getcwd: ENOENT; CI's
    /// `working-directory-in-new-directory`, 1 of 300 rounds once).
    @Test func theListingLeavesAChangeBegunAfterTheWatchToItsEcho() {
        let own = OwnChanges()
        own.enabled.store(true, ordering: .relaxed)
        let watchBegan = OwnChanges.now()
        "s4".withCString { n in own.expectingEntry(7, n) { () in } }
        own.metBeforeWatch(7, "s4", watchedSince: watchBegan)
        #expect(own.entryEcho(7, "s4", queuedAt: 1 << 40, watchedSince: watchBegan) == .own)
        #expect(!own.expectsEntries)
    }

    /// One begun before the watch, still in its system call when the watch began, may have
    /// echoed on it: the listing forgets it, and its echo is uncertain (an expiry, which
    /// leaves an entry in use hashed); the name's next event is an outside change.
    @Test func theListingLeavesAChangeBegunBeforeTheWatchUncertain() {
        let own = OwnChanges()
        own.enabled.store(true, ordering: .relaxed)
        "s3".withCString { own.expectEntry(7, $0) }
        let watchBegan = OwnChanges.now()
        "s3".withCString { own.entryChanged(7, $0, bounded: false) }
        own.metBeforeWatch(7, "s3", watchedSince: watchBegan)
        #expect(own.entryEcho(7, "s3", queuedAt: 1 << 40, watchedSince: watchBegan) == .uncertain)
        #expect(own.entryEcho(7, "s3", queuedAt: 1 << 41, watchedSince: watchBegan) == .outside)
        #expect(!own.expectsEntries)
    }

    /// Made before the watch began, then removed once it had: the removal's echo is the
    /// daemon's, and the store's next making of the name is not (a coherence fuzzer,
    /// s29b-def-2913: the kernel's negative entry of the name stayed for its timeout).
    @Test func aChangeBeforeTheWatchAndOneAfterLeaveOneEcho() {
        let own = OwnChanges()
        own.enabled.store(true, ordering: .relaxed)
        let name: FilePath.Component = "f"
        "f".withCString { n in own.expectingEntry(7, n) { () in } }           // no echo: unwatched
        let watchBegan = OwnChanges.now()
        "f".withCString { n in own.expectingEntry(7, n, removing: true) { () in } }
        #expect(own.isOwnEntry(7, name, queuedAt: 100, watchedSince: watchBegan))   // the removal's
        #expect(!own.isOwnEntry(7, name, queuedAt: 200, watchedSince: watchBegan))  // the store's
    }

    /// The same for a removal's IN_ATTRIB (the link count), which the watcher passes over
    /// while a removal of the name is expected.
    @Test func aRemovalMadeBeforeTheWatchBeganHidesNoAttributeChange() {
        let own = OwnChanges()
        own.enabled.store(true, ordering: .relaxed)
        let name: FilePath.Component = "g"
        "g".withCString { n in own.expectingEntry(7, n, removing: true) { () in } }
        #expect(own.expectsRemoval(7, name, queuedAt: 1 << 40))
        #expect(!own.expectsRemoval(7, name, queuedAt: 1 << 40, watchedSince: OwnChanges.now()))
    }
}
