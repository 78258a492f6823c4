@testable import FileManagerCore
import Glibc
import Synchronization
import SystemPackage
import Testing

/// The store watcher's test for "is this echo the daemon's own change?" on items: the item's
/// state (ctime) must still be exactly what the daemon recorded after its change.
@Suite("Store watcher: recognising the daemon's own item changes")
struct OwnChangesTests {
    func temporaryFile() throws -> (CInt, String) {
        var template = Array("/tmp/containerfs-ownchanges-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        try #require(fd >= 0)
        return (fd, String(cString: template))
    }

    /// A watching `OwnChanges` and a temporary file (its descriptor and path); with
    /// `queueAt`, a real, empty inotify queue whose position is that many bytes (as if they
    /// had been read from it). Undone by `cleanUp`.
    func watching(queueAt bytes: UInt64? = nil) throws -> (OwnChanges, CInt, String) {
        let own = OwnChanges()
        own.enabled.store(true, ordering: .relaxed)
        if let bytes {
            let q = inotify_init1(CInt(IN_NONBLOCK | IN_CLOEXEC))
            try #require(q >= 0)
            own.cursor.descriptor.store(q, ordering: .relaxed)
            own.cursor.readBytes.store(bytes, ordering: .relaxed)
        }
        let (fd, path) = try temporaryFile()
        return (own, fd, path)
    }

    func cleanUp(_ own: OwnChanges, _ fd: CInt, _ path: String) {
        close(fd)
        unlink(path)
        let q = own.cursor.descriptor.load(ordering: .relaxed)
        if q >= 0 { close(q) }
    }

    /// The daemon's `chmod` of the file (`changingItem`), whose IN_ATTRIB takes 32 bytes of
    /// the queue; the state after it.
    func daemonChmod(_ own: OwnChanges, _ inode: UInt64, _ fd: CInt) throws -> stat {
        try own.changingItem(inode, descriptor: fd) { () throws(Errno) -> stat in
            _ = fchmod(fd, 0o640)
            own.cursor.readBytes.add(32, ordering: .relaxed)
            return try Syscall.fstat(fd)
        }
    }

    func state(_ fd: CInt) throws -> stat {
        var st = stat()
        try #require(fstat(fd, &st) == 0)
        return st
    }

    /// A watching `OwnChanges`, and a file the daemon has just changed and recorded, with
    /// the mark `after` (0: a change any echo may match; `.max`: a write, matched once its
    /// handle's close marks it).
    func recordedChange(after: UInt64 = 0) throws -> (OwnChanges, CInt, String, stat) {
        let (own, fd, path) = try watching()
        _ = write(fd, "a", 1)
        let st = try state(fd)
        own.recordItem(UInt64(st.st_ino), st, after: after)
        return (own, fd, path, st)
    }

    @Test func theRecordedStateIsOwnAsOftenAsItEchoes() throws {
        let (own, fd, path, _) = try recordedChange()
        defer { cleanUp(own, fd, path) }
        // Merged or not, every echo of that state is the daemon's own.
        #expect(own.isOwnItemState(try state(fd), queuedAt: 0))
        #expect(own.isOwnItemState(try state(fd), queuedAt: 0))
    }

    @Test func aLaterChangeByAnyoneIsNotOwn() throws {
        let (own, fd, path, st) = try recordedChange()
        defer { cleanUp(own, fd, path) }
        _ = pwrite(fd, "b", 1, 0)  // same size, new bytes, right after the record
        #expect(!own.isOwnItemState(try state(fd), queuedAt: 0))
        // The record is gone: even the old state no longer counts as own.
        #expect(!own.isOwnItemState(st, queuedAt: 0))
    }

    /// The watcher reads an event's state when it gets to it: an earlier event's read may
    /// see the state from before a change the daemon was making then, and reach the table
    /// after the change was recorded. That older state says nothing of the record, whose
    /// echo is still to come (deleting it took that echo for an outside change).
    @Test func anOlderStateLeavesTheRecord() throws {
        let (own, fd, path) = try watching()
        defer { cleanUp(own, fd, path) }
        let older = try state(fd)                           // read by the watcher
        let st = try daemonChmod(own, UInt64(older.st_ino), fd)  // the daemon's change lands first
        #expect(!own.isOwnItemState(older, queuedAt: 0))
        #expect(own.isOwnItemState(st, queuedAt: 0))       // its echo
    }

    /// A handle's close echoes after the kernel's RELEASE, which comes after the caller's
    /// close(2): an edit made in the store after the daemon's last write must not become
    /// the daemon's own by the close (it was recorded there before, and served stale).
    @Test func aCloseAfterAnEditInTheStoreKeepsTheEditOutside() throws {
        let (own, fd, path, _) = try recordedChange(after: .max)  // the daemon's last write
        defer { cleanUp(own, fd, path) }
        let other = open(path, O_WRONLY)                   // the store, edited meanwhile
        try #require(other >= 0)
        _ = write(other, "bb", 2)
        close(other)
        let edited = try state(fd)
        own.closingItem(UInt64(edited.st_ino), descriptor: fd)  // then the handle closes
        #expect(!own.isOwnItemState(edited, queuedAt: 0, closing: true))
    }

    /// The record of an open (or a write) matches only the echo of the handle's close: not
    /// the echo of an outside edit the watcher had not read yet when the daemon opened the
    /// file (its state includes that edit), nor that of one whose writer closes while the
    /// daemon's handle is open.
    @Test func anOpensRecordMatchesOnlyItsClosesEcho() throws {
        let (own, fd, path) = try watching(queueAt: 160)                // 160 bytes of events queued so far
        defer { cleanUp(own, fd, path) }
        let st = try state(fd)                             // edited outside, event at 128 unread
        own.recordItem(UInt64(st.st_ino), st, after: .max) // then opened by the daemon
        #expect(!own.isOwnItemState(st, queuedAt: 128, closing: true))   // the outside edit's echo
        #expect(!own.isOwnItemState(st, queuedAt: 144, closing: true))   // a writer's close, handle still open
        own.closingItem(UInt64(st.st_ino), descriptor: fd) // the daemon's close, marked at 160
        #expect(!own.isOwnItemState(st, queuedAt: 128, closing: true))
        #expect(own.isOwnItemState(st, queuedAt: 160, closing: true))    // the close of the daemon's handle
    }

    /// A setattr's own IN_ATTRIB is queued by its system call, before the state is recorded:
    /// the mark is the queue's position before the change.
    @Test func aSetattrsEchoMatchesButNotAnEarlierOutsideEdit() throws {
        let (own, fd, path) = try watching(queueAt: 96)                 // an outside edit's echo at 64, unread
        defer { cleanUp(own, fd, path) }
        let st = try daemonChmod(own, 7, fd)              // its IN_ATTRIB, at 96
        var same = st
        same.st_ino = 7
        #expect(!own.isOwnItemState(same, queuedAt: 64))
        #expect(own.isOwnItemState(same, queuedAt: 96))
    }

    /// inotify merges an IN_ATTRIB identical to the unread one before it: `chmod` then
    /// `utimens` by the daemon, faster than the watcher reads, echo once, at the first.
    @Test func twoSetattrsInARowMatchTheirMergedEcho() throws {
        let (own, fd, path) = try watching(queueAt: 64)
        defer { cleanUp(own, fd, path) }
        let inode = UInt64(try state(fd).st_ino)
        _ = try daemonChmod(own, inode, fd)                // IN_ATTRIB at 64
        let st = try own.changingItem(inode, descriptor: fd) { () throws(Errno) -> stat in
            var times = [timespec(tv_sec: 1_400_000_000, tv_nsec: 0), timespec(tv_sec: 1_400_000_000, tv_nsec: 0)]
            _ = futimens(fd, &times)                       // merged into the IN_ATTRIB at 64
            return try Syscall.fstat(fd)
        }
        #expect(own.isOwnItemState(st, queuedAt: 64))
    }

    /// A setattr made while a handle that wrote is open marks IN_ATTRIB only: until the
    /// handle's close, an outside writer's IN_CLOSE_WRITE still does not match.
    @Test func aSetattrDoesNotOpenTheCloseEchoEarly() throws {
        let (own, fd, path) = try watching(queueAt: 64)
        defer { cleanUp(own, fd, path) }
        let inode = UInt64(try state(fd).st_ino)
        own.recordItem(inode, try state(fd), after: .max)  // opened and written by the daemon
        let st = try daemonChmod(own, inode, fd)          // its IN_ATTRIB, at 64
        #expect(own.isOwnItemState(st, queuedAt: 64))
        #expect(!own.isOwnItemState(st, queuedAt: 96, closing: true))  // someone else's close
        own.closingItem(inode, descriptor: fd)                         // the daemon's, marked at 96
        #expect(own.isOwnItemState(st, queuedAt: 96, closing: true))
    }

    /// A descriptor the daemon opened only to check access (`open(O_CREAT)` of an existing
    /// file under writeback) closes as its own: marked just before its close.
    @Test func anUnwrittenDescriptorsCloseIsOwn() throws {
        let (own, fd, path) = try watching(queueAt: 48)
        defer { cleanUp(own, fd, path) }
        let st = try state(fd)
        own.closingUnwritten(UInt64(st.st_ino), descriptor: fd, after: .max)
        #expect(own.isOwnItemState(st, queuedAt: 48, closing: true))
        #expect(!own.isOwnItemState(st, queuedAt: 16, closing: true))  // an earlier writer's close
        #expect(!own.isOwnItemState(st, queuedAt: 48))                  // no change of attributes
    }

    @Test func aCloseRightAfterTheDaemonsWriteIsOwn() throws {
        let (own, fd, path, st) = try recordedChange(after: .max)
        defer { cleanUp(own, fd, path) }
        #expect(!own.isOwnItemState(st, queuedAt: 0, closing: true))      // nothing echoes a write before its close
        own.closingItem(UInt64(st.st_ino), descriptor: fd)
        #expect(own.isOwnItemState(try state(fd), queuedAt: 0, closing: true))
    }

    /// The close renews the record: a handle that last wrote long ago still closes as the
    /// daemon's own, for another lifetime from its close.
    @Test func aCloseRenewsAnExpiredRecordThatStillMatches() throws {
        let (own, fd, path) = try watching()
        defer { cleanUp(own, fd, path) }
        let st = try state(fd)
        own.recordItem(UInt64(st.st_ino), st, after: .max, lifetime: 0)  // expired at once
        own.closingItem(UInt64(st.st_ino), descriptor: fd)
        #expect(own.isOwnItemState(try state(fd), queuedAt: 0, closing: true))
    }

    @Test func aCloseWithoutARecordIsNotOwn() throws {
        let (own, fd, path) = try watching()
        defer { cleanUp(own, fd, path) }
        let st = try state(fd)
        own.closingItem(UInt64(st.st_ino), descriptor: fd)
        #expect(!own.isOwnItemState(st, queuedAt: 0, closing: true))
    }

    @Test func nothingIsOwnWithoutARecord() throws {
        let (own, fd, path) = try watching()
        defer { cleanUp(own, fd, path) }
        #expect(!own.isOwnItemState(try state(fd), queuedAt: 0))
    }

    @Test func twoChangesOfOneNameBeforeTheWatcherCatchesUpAreTwoEchoes() {
        let own = OwnChanges()
        own.enabled.store(true, ordering: .relaxed)
        let name: FilePath.Component = "h"
        "h".withCString { own.expectEntry(7, $0) }   // a rename onto h
        "h".withCString { own.expectEntry(7, $0) }   // then its unlink
        #expect(own.isOwnEntry(7, name))               // MOVED_TO h
        #expect(own.isOwnEntry(7, name))               // DELETE h
        #expect(!own.isOwnEntry(7, name))              // a third change is someone else's
    }

    /// An outside change of a name queued before the mark the daemon's own change of it took
    /// (an exact queue position, before its system call) is no echo of it, and leaves the
    /// expectation to the echo that comes after (a coherence fuzzer, s26c-wb-142: the
    /// store's rename over a name was taken for the mount's rename of it).
    @Test func anEventQueuedBeforeTheChangesMarkIsNoEcho() {
        let own = OwnChanges()
        own.enabled.store(true, ordering: .relaxed)
        let name: FilePath.Component = "h"
        own.expectEntry(7, "h", removing: true, after: 100)
        #expect(!own.isOwnEntry(7, name, queuedAt: 60))    // the store's change, queued before
        #expect(!own.expectsRemoval(7, name, queuedAt: 60))
        #expect(own.isOwnEntry(7, name, queuedAt: 100))    // the echo
        #expect(!own.isOwnEntry(7, name, queuedAt: 140))   // met: a later one is someone else's
        // A change with no mark among them: any position may be an echo.
        own.expectEntry(7, "h", after: 100)
        own.expectEntry(7, "h")
        #expect(own.isOwnEntry(7, name, queuedAt: 10))
        #expect(own.isOwnEntry(7, name, queuedAt: 10))
        #expect(!own.isOwnEntry(7, name, queuedAt: 10))
    }

    /// The IN_ATTRIB of an unlink (its link count) is taken for the daemon's own while the
    /// removal is expected; a creation whose IN_CREATE never came (made before its
    /// directory was watched) must not hide the new file's IN_ATTRIB, an outside `chmod`.
    @Test func onlyAnExpectedRemovalCoversALinkCountEcho() {
        let own = OwnChanges()
        own.enabled.store(true, ordering: .relaxed)
        let name: FilePath.Component = "f"
        own.expectEntry(7, "f")
        #expect(!own.expectsRemoval(7, name))
        own.expectEntry(7, "f", removing: true)
        #expect(own.expectsRemoval(7, name))
        #expect(!own.expectsRemoval(8, name))
        // Each echo meets one expectation; once both are met, nothing is expected.
        #expect(own.isOwnEntry(7, name))
        #expect(own.isOwnEntry(7, name))
        #expect(!own.expectsRemoval(7, name))
        #expect(!own.isOwnEntry(7, name))
    }

    // MARK: - A write after the daemon's setattr; an item made after the event

    /// SQLite's `fchown` of a new journal, then its writes, faster than the watcher reads:
    /// the chown's IN_ATTRIB meets the state the writes left, and is still the daemon's own.
    @Test func aWriteOnTheSetattrsStateKeepsItsEchoOwn() throws {
        let (own, fd, path) = try watching(queueAt: 64)
        defer { cleanUp(own, fd, path) }
        let inode = UInt64(try state(fd).st_ino)
        _ = try daemonChmod(own, inode, fd)                 // its IN_ATTRIB, at 64, unhandled
        let start = own.beforeWrite(inode, descriptor: fd).forRecord
        #expect(start != nil)
        _ = pwrite(fd, "journal", 7, 0)
        own.recordWrite(inode, descriptor: fd, before: start)
        #expect(own.isOwnItemState(try state(fd), queuedAt: 64))
        #expect(!own.isOwnItemState(try state(fd), queuedAt: 32))  // before the chown: someone else's
        #expect(!own.isOwnItemState(try state(fd), queuedAt: 96, closing: true))  // no close yet
    }

    /// An outside `chmod` between the daemon's setattr and its write: the write does not
    /// start from the daemon's state, and the IN_ATTRIB stays an outside change.
    @Test func anOutsideChangeBeforeTheWriteStaysOutside() throws {
        let (own, fd, path) = try watching(queueAt: 64)
        defer { cleanUp(own, fd, path) }
        let inode = UInt64(try state(fd).st_ino)
        _ = try daemonChmod(own, inode, fd)                 // IN_ATTRIB at 64
        _ = fchmod(fd, 0o600)                               // outside, IN_ATTRIB at 96
        let start = own.beforeWrite(inode, descriptor: fd).forRecord
        _ = pwrite(fd, "journal", 7, 0)
        own.recordWrite(inode, descriptor: fd, before: start)
        #expect(!own.isOwnItemState(try state(fd), queuedAt: 96))
    }

    /// An outside `chmod` while the daemon writes (after its `fstat` before the write, or
    /// after the write itself): inotify merges its IN_ATTRIB into the setattr's unread one,
    /// which must not match the state left.
    @Test func anOutsideChangeDuringTheWriteStaysOutside() throws {
        for during in [true, false] {
            let (own, fd, path) = try watching(queueAt: 64)
            defer { cleanUp(own, fd, path) }
            let inode = UInt64(try state(fd).st_ino)
            _ = try daemonChmod(own, inode, fd)             // IN_ATTRIB at 64, unread
            let start = own.beforeWrite(inode, descriptor: fd).forRecord
            #expect(start != nil)
            if during { _ = fchmod(fd, 0o600) }             // outside, merged at 64
            _ = pwrite(fd, "journal", 7, 0)
            if !during { _ = fchmod(fd, 0o600) }
            own.recordWrite(inode, descriptor: fd, before: start)
            #expect(!own.isOwnItemState(try state(fd), queuedAt: 64), "outside chmod \(during ? "before" : "after") the write")
        }
    }

    /// Once the watcher handled the setattr's echo, a write needs no `fstat` before it and
    /// keeps nothing: later IN_ATTRIBs meet the write's state as before.
    @Test func afterTheEchoWasHandledAWriteCarriesNothing() throws {
        let (own, fd, path) = try watching(queueAt: 64)
        defer { cleanUp(own, fd, path) }
        let inode = UInt64(try state(fd).st_ino)
        _ = try daemonChmod(own, inode, fd)                 // IN_ATTRIB at 64; echo by 96 or so
        own.cursor.handledBytes.store(UInt64(StoreWatcher.bufferSize) + 200, ordering: .relaxed)
        #expect(own.beforeWrite(inode, descriptor: fd).forRecord == nil)
        _ = pwrite(fd, "journal", 7, 0)
        own.recordWrite(inode, descriptor: fd, before: nil)
        #expect(!own.isOwnItemState(try state(fd), queuedAt: 64))
    }

    /// An item event queued before the daemon made the item that now holds the name was
    /// about the name's earlier item (SQLite's previous journal); one queued after is judged
    /// as usual. Only while the birth is recent, and only with an exact mark.
    @Test func anEventQueuedBeforeTheItemWasMadeIsNotAboutIt() throws {
        let (own, fd, path) = try watching(queueAt: 128)
        defer { cleanUp(own, fd, path) }
        let st = try state(fd)
        let (_, mark) = own.creationMarks()
        #expect(mark == 128)
        own.made(UInt64(st.st_ino), after: mark)
        #expect(own.madeAfter(st, queuedAt: 96))
        #expect(!own.madeAfter(st, queuedAt: 128))
        #expect(!own.madeAfter(st, queuedAt: 160))
        var other = st
        other.st_ino += 1
        #expect(!own.madeAfter(other, queuedAt: 96))
        own.made(UInt64(st.st_ino) + 2, after: nil)        // no exact mark: nothing recorded
        other.st_ino = st.st_ino + 2
        #expect(!own.madeAfter(other, queuedAt: 0))
    }
}
