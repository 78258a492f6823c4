@testable import FileManagerCore
import CLinux
import Foundation
import Glibc
import SystemPackage
import Testing

/// A writer in the store whose name of a hard-linked file went before it closed
/// (DESIGN.md 14, "Hard links"; `FileWatches`): the directories' watches have
/// IN_EXCL_UNLINK, so only a watch of the file itself hears that close.
@Suite("Watches of files whose name went")
struct FileWatchesTests {
    typealias Fixture = StoreWatcherCatchUpTests.Fixture

    /// Documents/f and Documents/g are one file, held under g; a writer in the store opens
    /// it by f.
    private static func linkedAndOpened(_ f: Fixture) throws -> CInt {
        #expect(link(f.documentsPath + "/f", f.documentsPath + "/g") == 0)
        _ = try withName("g") { try f.volume.lookup(f.documents, $0) }   // records its two names
        f.watcher.readQueue()
        _ = f.observer.flush()
        let writer = open(f.documentsPath + "/f", O_WRONLY)
        #expect(writer >= 0)
        return writer
    }

    @Test func aWritersCloseAfterTheStoreRemovedItsNameIsTold() throws {
        let f = try Fixture()
        let writer = try Self.linkedAndOpened(f)
        #expect(unlink(f.documentsPath + "/f") == 0)
        f.watcher.readQueue()                                      // the count fell: watched
        #expect(f.observer.flush().contains("item \(f.file.inode)"))
        #expect(f.volume.items.fileWatches.count == 1)
        #expect(pwrite(writer, "new", 3, 0) == 3)
        close(writer)
        f.watcher.readQueue()
        #expect(f.observer.flush().contains("item \(f.file.inode)"))  // nothing was heard before
    }

    @Test func aWritersCloseAfterTheMountReplacedItsNameIsTold() throws {
        let f = try Fixture()
        let writer = try Self.linkedAndOpened(f)
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/h", contents: Data("h".utf8))
        try f.rename("h", "f")                                     // through the mount: watched before
        #expect(f.volume.items.fileWatches.count == 1)
        f.watcher.readQueue()
        _ = f.observer.flush()
        #expect(pwrite(writer, "new", 3, 0) == 3)
        close(writer)
        f.watcher.readQueue()
        #expect(f.observer.flush().contains("item \(f.file.inode)"))
    }

    /// A close through a name still there reaches the directory's watch and the file's:
    /// the daemon's own close is its echo on both, not an outside change on the second.
    @Test func theDaemonsCloseIsItsOwnOnBothWatches() throws {
        let f = try Fixture()
        let writer = try Self.linkedAndOpened(f)
        close(writer)
        try withName("g") { try f.volume.unlink(f.documents, $0) }  // f stays, watched
        #expect(f.volume.items.fileWatches.count == 1)
        f.watcher.readQueue()
        _ = f.observer.flush()
        do {
            let handle = try f.volume.open(f.file, flags: O_WRONLY)
            #expect(pwrite(handle.fd, "own", 3, 0) == 3)
            handle.wrote()
        }                                                          // released: by f, heard twice
        f.watcher.readQueue()
        #expect(f.observer.flush().isEmpty)
    }

    /// A writer in the store wrote, the daemon opened the file and closed it (its state
    /// then held that write), and the writer closed through a name still there: both
    /// watches hear each close, and the writer's is an outside change all the same (one
    /// close echoes once, `OwnChanges`).
    @Test func aWritersCloseAfterTheDaemonsIsToldOnAWatchedFile() throws {
        let f = try Fixture()
        let writer = try Self.linkedAndOpened(f)
        #expect(link(f.documentsPath + "/f", f.documentsPath + "/h") == 0)
        try withName("h") { try f.volume.unlink(f.documents, $0) }  // f and g stay, watched
        #expect(f.volume.items.fileWatches.count == 1)
        #expect(try f.writerClosesAfterTheDaemon(writer).contains("item \(f.file.inode)"))
    }

    /// The kernel let go of the file (under writeback the watcher makes it, after a change
    /// in the store): the watch stays, and once a look-up holds the file again the writer's
    /// close is heard.
    @Test func aWatchOutlivesTheKernelsHoldOfTheFile() throws {
        let f = try Fixture()
        let writer = try Self.linkedAndOpened(f)
        #expect(unlink(f.documentsPath + "/f") == 0)
        f.watcher.readQueue()
        _ = f.observer.flush()
        f.volume.items.forget(f.file.inode, count: .max)
        let other = open("/proc/self/fd/\(writer)", O_WRONLY)           // a second writer closes meanwhile
        #expect(pwrite(other, "one", 3, 0) == 3)
        close(other)
        f.watcher.readQueue()                                      // nothing held: nothing to tell
        #expect(f.observer.flush().isEmpty)
        let (again, _) = try withName("g") { try f.volume.lookup(f.documents, $0) }
        #expect(f.volume.items.fileWatches.count == 1)
        #expect(pwrite(writer, "two", 3, 0) == 3)
        close(writer)
        f.watcher.readQueue()
        #expect(f.observer.flush().contains("item \(again.inode)"))
    }

    /// At the limit, a new watch takes the place of one whose file the kernel no longer
    /// holds, and of none other.
    @Test func atTheLimitOnlyWatchesOfFilesNoLongerHeldGo() throws {
        let f = try Fixture()
        let watches = FileWatches(limit: 2)
        let inotify = clinux_inotify_init()
        defer { close(inotify) }
        watches.descriptor.store(inotify, ordering: .relaxed)
        var items: [Item] = [f.file]
        for name in ["g", "h"] {
            _ = FileManager.default.createFile(atPath: f.documentsPath + "/" + name, contents: Data(name.utf8))
            items.append(try withName(name) { try f.volume.lookup(f.documents, $0) }.0)
        }
        // Watched: a close the directory heard makes the file's next event its twin.
        func watched(_ item: Item) throws -> Bool {
            let st = try Syscall.fstat(item.fd)
            watches.heardByDirectory(item.inode, st, endsAt: 64)
            return watches.isTwin(item.inode, st, queuedAt: 64)
        }
        watches.watch(items[0]) { _ in true }
        watches.watch(items[1]) { _ in true }
        watches.watch(items[2]) { _ in true }                      // all held: no room
        #expect(watches.count == 2)
        #expect(try !watched(items[2]))
        watches.watch(items[2]) { $0 != items[0].inode }           // f no longer held
        #expect(watches.count == 2)
        #expect(try watched(items[2]))
        #expect(try watched(items[1]))                              // held: kept
        #expect(try !watched(items[0]))                             // its watch gave way
    }
}
