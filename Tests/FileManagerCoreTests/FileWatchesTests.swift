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

    /// The kernel no longer holds the file: its watch ends at its next event.
    @Test func aWatchOfAFileNoLongerHeldEnds() throws {
        let f = try Fixture()
        let writer = try Self.linkedAndOpened(f)
        #expect(unlink(f.documentsPath + "/f") == 0)
        f.watcher.readQueue()
        #expect(f.volume.items.fileWatches.count == 1)
        f.volume.items.forget(f.file.inode, count: .max)
        #expect(pwrite(writer, "new", 3, 0) == 3)
        close(writer)
        f.watcher.readQueue()
        #expect(f.volume.items.fileWatches.count == 0)
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
        watches.watch(items[0]) { _ in true }
        watches.watch(items[1]) { _ in true }
        watches.watch(items[2]) { _ in true }                      // all held: no room
        #expect(watches.count == 2)
        #expect(watches.isNews(items[2].inode, try Syscall.fstat(items[2].fd)))   // not watched
        watches.watch(items[2]) { $0 != items[0].inode }           // f no longer held
        #expect(watches.count == 2)
        let st = try Syscall.fstat(items[2].fd)
        #expect(watches.isNews(items[2].inode, st))                 // watched now: recorded
        #expect(!watches.isNews(items[2].inode, st))
        #expect(watches.isNews(items[0].inode, try Syscall.fstat(items[0].fd)))   // f's watch went
    }
}
