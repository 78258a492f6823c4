@testable import FileManagerCore
import Foundation
import Glibc
import Testing

/// An open compares a file's content (mtime and size) with what the kernel's cached pages
/// were last known to show (`Item.pagesShow`, `Volume.pagesPredateContent`; DESIGN.md 14):
/// a change no event told of (a writer still holding the file, a `truncate(2)` by path,
/// two closes merged into one event) drops the pages; the daemon's own changes and those
/// the watcher told of do not.
@Suite("Pages the kernel keeps across opens")
struct PagesShowTests {
    typealias Fixture = StoreWatcherCatchUpTests.Fixture

    /// Opens Documents/f read-only, as the kernel's OPEN does, and releases it; whether
    /// the open kept no pages, and what the observer was told meanwhile.
    private static func reopen(_ f: Fixture) throws -> (stale: Bool, told: [String]) {
        let stale = try f.volume.open(f.file, flags: O_RDONLY).pagesStale
        return (stale, f.observer.flush())
    }

    @Test func aWriteByAProgramStillHoldingTheFileDropsThePagesOnce() throws {
        let f = try Fixture()
        #expect(try Self.reopen(f).stale == false)                    // as looked up
        let writer = open(f.documentsPath + "/f", O_WRONLY)
        #expect(pwrite(writer, "new", 3, 0) == 3)                      // no event: still open
        f.watcher.readQueue()
        #expect(f.observer.flush().isEmpty)
        let first = try Self.reopen(f)
        #expect(first.stale)
        #expect(first.told == ["item \(f.file.inode)"])                // size and times too
        let second = try Self.reopen(f)
        #expect(second.stale == false)                                 // nothing new since
        #expect(second.told.isEmpty)
        close(writer)
    }

    /// Under writeback the kernel keeps the size it has while it holds the inode: the file
    /// is marked changed outside, as the watcher marks it, so every handle is uncached and
    /// the kernel is asked to let go of the inode (its name's entry goes).
    @Test func underWritebackTheFileIsUncachedUntilTheKernelMakesANewInode() throws {
        let f = try Fixture(writeback: true)
        let writer = open(f.documentsPath + "/f", O_WRONLY)
        #expect(pwrite(writer, "longer", 6, 0) == 6)
        #expect(f.volume.kernelMayHoldOldState(f.file) == false)
        let first = try f.volume.open(f.file, flags: O_RDONLY)
        #expect(first.pagesStale && first.uncached)
        #expect(f.volume.kernelMayHoldOldState(f.file))               // the next ones too
        let told = f.observer.flush()
        #expect(told.contains("item \(f.file.inode)"))
        #expect(told.contains("entry f"))
        close(writer)
    }

    /// Two opens at once: the second finds the stamps equal, but the first one's news is
    /// still on its way, which the second must wait for too (`FUSEBridge.open`).
    @Test func anOpenBehindOneThatFoundAChangeSeesItsNewsPending() throws {
        let f = try Fixture()
        #expect(truncate(f.documentsPath + "/f", 1) == 0)
        #expect(try f.volume.open(f.file, flags: O_RDONLY).pagesStale)
        #expect(try f.volume.open(f.file, flags: O_RDONLY).pagesStale == false)
        #expect(f.volume.observersHavePendingChanges(for: f.file.inode))
        _ = f.observer.flush()
        #expect(f.volume.observersHavePendingChanges(for: f.file.inode) == false)
    }

    /// Under writeback the kernel writes its mtime back (a SETATTR after a rename): set on
    /// a file a writer in the store has rewritten in place, it may bring back the very
    /// stamp the pages were known to show, though their bytes are gone.
    @Test func anOwnSetattrThatBringsBackTheStampOfThePagesLeavesThemInDoubt() throws {
        let f = try Fixture()
        let old = try Syscall.fstat(f.file.fd)
        let writer = open(f.documentsPath + "/f", O_WRONLY)
        #expect(pwrite(writer, "new", 3, 0) == 3)                      // the same size
        var changes = AttributeChanges()
        changes.modificationTime = .set(old.st_mtim)
        _ = try f.volume.setAttributes(f.file, changes, handle: nil)
        #expect(ContentStamp.of(try Syscall.fstat(f.file.fd)) == ContentStamp.of(old))
        #expect(try Self.reopen(f).stale)
        close(writer)
    }

    @Test func aTruncationByPathDropsThePages() throws {
        let f = try Fixture()
        #expect(truncate(f.documentsPath + "/f", 1) == 0)              // IN_MODIFY alone
        f.watcher.readQueue()
        #expect(f.observer.flush().isEmpty)
        #expect(try Self.reopen(f).stale)
    }

    /// The same size and, to the nanosecond, the same mtime is no change: only a new
    /// mtime or size is (a `utimens` that set it back queues IN_ATTRIB, which is told).
    @Test func anOutsideCloseToldByTheWatcherDropsNothingMore() throws {
        let f = try Fixture()
        StoreWatcherCatchUpTests.overwrite(f.documentsPath + "/f", "newer")
        f.watcher.readQueue()
        #expect(f.observer.flush() == ["item \(f.file.inode)"])        // the watcher told it
        let after = try Self.reopen(f)
        #expect(after.stale == false)
        #expect(after.told.isEmpty)
    }

    /// A WRITE through a handle, as the FUSE bridge makes it.
    private static func write(_ handle: OpenFile, _ text: String, at offset: off_t = 0) {
        let start = handle.writeStarts()
        #expect(pwrite(handle.fd, text, text.utf8.count, offset) == text.utf8.count)
        handle.wrote(from: start)
    }

    @Test func theDaemonsOwnWritesKeepThePages() throws {
        let f = try Fixture()
        do {
            let handle = try f.volume.open(f.file, flags: O_WRONLY)
            Self.write(handle, "own and longer")
            Self.write(handle, "and more", at: 14)
        }                                                              // released
        f.watcher.readQueue()
        _ = f.observer.flush()
        #expect(try Self.reopen(f).stale == false)
    }

    @Test func theDaemonsOwnTruncationKeepsThePages() throws {
        let f = try Fixture()
        var changes = AttributeChanges()
        changes.size = 1
        _ = try f.volume.setAttributes(f.file, changes, handle: nil)  // the kernel cuts its own
        #expect(try Self.reopen(f).stale == false)
    }

    /// A rename moves the ctime and leaves the content.
    @Test func theDaemonsOwnRenameKeepsThePages() throws {
        let f = try Fixture()
        try f.rename("f", "g")
        #expect(try Self.reopen(f).stale == false)
    }

    /// While the daemon has the file open for writing, the pages show what its writes
    /// left: an open beside it keeps them if the file is in that state, and the handle's
    /// close records it.
    @Test func anOpenBesideTheDaemonsWriterKeepsThePagesItsWritesLeft() throws {
        let f = try Fixture()
        var handle: OpenFile? = try f.volume.open(f.file, flags: O_WRONLY)
        Self.write(handle!, "own and longer")
        #expect(try Self.reopen(f).stale == false)
        let written = ContentStamp.of(try Syscall.fstat(f.file.fd))
        #expect(f.file.pagesShow.load(ordering: .relaxed) != written)
        handle = nil                                                   // released
        #expect(f.file.pagesShow.load(ordering: .relaxed) == written)
    }

    /// A change no event tells of, made between two writes of the daemon's: its writes
    /// would carry it into the state their close records as what the pages show.
    @Test func aTruncationByPathBetweenTheDaemonsWritesLeavesThePagesInDoubt() throws {
        let f = try Fixture()
        var handle: OpenFile? = try f.volume.open(f.file, flags: O_WRONLY)
        Self.write(handle!, "own and longer")
        #expect(truncate(f.documentsPath + "/f", 4) == 0)              // IN_MODIFY alone
        Self.write(handle!, "x")
        handle = nil                                                   // released
        #expect(try Self.reopen(f).stale)
    }

    @Test func anOpenBesideTheDaemonsWriterAfterAnOutsideChangeDropsThePages() throws {
        let f = try Fixture()
        let handle = try f.volume.open(f.file, flags: O_WRONLY)
        Self.write(handle, "own and longer")
        #expect(truncate(f.documentsPath + "/f", 4) == 0)
        #expect(try Self.reopen(f).stale)
        withExtendedLifetime(handle) {}
    }

    /// Under writeback the kernel's writes come late and in parallel: a check could take
    /// one of them for someone else's, and pages in doubt there leave every later handle
    /// uncached, so the daemon's writes check nothing (`OwnChanges.checksOwnState`).
    @Test func underWritebackTheDaemonsWritesCheckNothing() throws {
        let f = try Fixture(writeback: true)
        var handle: OpenFile? = try f.volume.open(f.file, flags: O_WRONLY)
        Self.write(handle!, "own and longer")
        #expect(truncate(f.documentsPath + "/f", 4) == 0)
        Self.write(handle!, "x")
        #expect(f.file.pagesShow.load(ordering: .relaxed) != ContentStamp.doubtful)
        handle = nil
        #expect(try Self.reopen(f).stale == false)
        #expect(f.volume.kernelMayHoldOldState(f.file) == false)
    }
}
