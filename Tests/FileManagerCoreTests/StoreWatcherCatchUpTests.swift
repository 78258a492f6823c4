@testable import FileManagerCore
import Foundation
import Glibc
import Synchronization
import SystemPackage
import Testing

/// An OPEN catching up with the store (DESIGN.md 27), with a real inotify queue and a
/// watcher whose thread is not started, so that only the catching up reads the queue.
@Suite("Store watcher: an open catches up first")
struct StoreWatcherCatchUpTests {
    /// An observer that queues what it is told, as the kernel notifier does, until `flush`.
    final class QueueingObserver: VolumeObserver, Sendable {
        struct State {
            var queued: [(inode: UInt64?, what: String)] = []
            var told: [String] = []
            var waiting: [@Sendable () -> Void] = []
            var droppedEntries: [@Sendable () -> Void] = []
        }
        let state = Mutex(State())

        func entryChanged(parent: UInt64, name: FilePath.Component) { state.withLock { $0.queued.append((nil, "entry \(name)")) } }
        func itemChanged(_ inode: UInt64) { state.withLock { $0.queued.append((inode, "item \(inode)")) } }
        func entryChangedOutside(parent: UInt64, name: FilePath.Component) { state.withLock { $0.told.append("inline entry \(name)") } }
        func itemChangedOutside(_ inode: UInt64) { state.withLock { $0.told.append("inline item \(inode)") } }
        func entryLeftBehind(parent: UInt64, name: FilePath.Component, then: @escaping @Sendable () -> Void) -> Bool {
            state.withLock { $0.queued.append((nil, "left \(name)")); $0.droppedEntries.append(then) }
            return true
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
                defer { s.told += s.queued.map(\.what); s.queued = []; s.waiting = []; s.droppedEntries = [] }
                return (s.queued.map(\.what), s.waiting + s.droppedEntries)
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
        let watcher: StoreWatcher
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
            watcher = try StoreWatcher(volume: volume)
            volume.addObserver(observer)
        }

        /// A writer in the store (`writer`, open on Documents/f) writes; the daemon opens f
        /// for writing and releases it; the writer closes. What the observer was told of the
        /// writer's close (the daemon's own close tells nothing).
        func writerClosesAfterTheDaemon(_ writer: CInt) throws -> [String] {
            #expect(pwrite(writer, "written outside", 15, 0) == 15)
            do { _ = try volume.open(file, flags: O_WRONLY) }      // opened and released at once
            watcher.readQueue()
            _ = observer.flush()                                    // its own close: nothing to tell
            close(writer)
            watcher.readQueue()
            return observer.flush()
        }

        /// Renames `from` to `to` in Documents as the kernel's RENAME does.
        func rename(_ from: String, _ to: String) throws {
            try withName(from) { a in try withName(to) { b in try volume.rename(documents, a, documents, b, flags: 0) } }
        }
    }

    @Test func anEditNotYetReadIsQueuedAndTheOpenWaitsForIt() throws {
        let f = try Fixture()
        #expect(f.watcher.isCaughtUp(with: f.file.inode))    // nothing happened yet
        overwrite(f.documentsPath + "/f", "new")
        #expect(!f.watcher.isCaughtUp(with: f.file.inode))   // read it: queued, not yet acted on
        let opened = Atomic<Bool>(false)
        f.watcher.whenCaughtUp(with: f.file.inode) { opened.store(true, ordering: .relaxed) }
        let early = opened.load(ordering: .relaxed)
        #expect(!early)
        #expect(f.observer.flush() == ["item \(f.file.inode)"])
        let late = opened.load(ordering: .relaxed)
        #expect(late)                                        // answered once the change took effect
        #expect(f.observer.toldInline.isEmpty)               // a request thread never notifies itself
        #expect(f.watcher.isCaughtUp(with: f.file.inode))
    }

    /// A look-up that read a file's state before an edit in the store, and made its item
    /// only after the watcher handled the edit (so the watcher told nobody: no item), answers
    /// the state after the edit (DESIGN.md 14, `OutsideItemChanges`).
    @Test func aLookUpOvertakenByTheWatcherReadsTheStateAgain() throws {
        let f = try Fixture()
        let (g, _) = try withName("g") { [f] in
            _ = FileManager.default.createFile(atPath: f.documentsPath + "/g", contents: Data("old".utf8))
            return try f.volume.lookup(f.documents, $0)
        }
        f.watcher.readQueue()
        _ = f.observer.flush()                               // g's creation
        f.volume.items.forget(g.inode, count: 1)             // the kernel let g go
        let since = f.volume.outsideItemChanges.sequence.load(ordering: .acquiring)  // a look-up begins...
        let before = try Syscall.fstat(g.fd)                 // ...and reads g's state
        overwrite(f.documentsPath + "/g", "edited in the store")
        f.watcher.readQueue()                                // the watcher handles the edit first
        #expect(f.observer.flush() == ["item \(g.inode)"])  // told, for an item nobody holds,
        #expect(f.volume.item(g.inode) == nil)               // which the kernel notifier drops
        let answered = try f.volume.current(before, of: g, since: since)
        #expect(before.st_size == 3)
        #expect(answered.st_size == 19)
        // A look-up that began after the edit was handled keeps what it read.
        let later = f.volume.outsideItemChanges.sequence.load(ordering: .acquiring)
        #expect(try f.volume.current(before, of: g, since: later).st_size == 3)
    }

    @Test func whenNothingIsPendingTheOpenGoesOnAtOnce() throws {
        let f = try Fixture()
        let opened = Atomic<Bool>(false)
        f.watcher.whenCaughtUp(with: f.file.inode) { opened.store(true, ordering: .relaxed) }
        let atOnce = opened.load(ordering: .relaxed)
        #expect(atOnce)
    }

    @Test func anOpenWaitsOnlyForNewsOfItsOwnItem() throws {
        let f = try Fixture()
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/g", contents: Data())
        let (other, _) = try withName("g") { try f.volume.lookup(f.documents, $0) }
        f.watcher.readQueue()
        _ = f.observer.flush()                               // g's creation
        overwrite(f.documentsPath + "/g", "changed")
        #expect(f.watcher.isCaughtUp(with: f.file.inode))    // g's news is queued; f has none
        #expect(!f.watcher.isCaughtUp(with: other.inode))
        #expect(f.observer.flush() == ["item \(other.inode)"])
    }

    @Test func aNewDirectoryIsLeftToTheWatcherThread() throws {
        let f = try Fixture()
        #expect(mkdir(f.documentsPath + "/d", 0o755) == 0)
        // Watching it (and walking what it holds) is no work for a request thread: the open
        // waits for the watcher thread to do it.
        #expect(!f.watcher.isCaughtUp(with: f.file.inode))
        #expect(!f.watcher.isCaughtUp(with: f.file.inode))
        let watched = f.watcher.watchCount
        #expect(f.observer.toldInline.isEmpty)
        #expect(watched == f.watcher.watchCount)
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
        f.watcher.readQueue()
        #expect(f.volume.wasReplacedInStore(f.file))
        #expect(f.volume.wasReplacedInStore(f.file))         // every open, until the kernel looks again
        #expect(!f.volume.wasReplacedInStore(other))         // still where it was
        let (fresh, _) = try withName("f") { try f.volume.lookup(f.documents, $0) }
        #expect(fresh !== f.file && !f.volume.wasReplacedInStore(fresh))
        #expect(unlink(f.documentsPath + "/g") == 0)
        f.watcher.readQueue()
        #expect(f.volume.wasReplacedInStore(other))          // deleted
        #expect(!f.volume.wasReplacedInStore(fresh))
    }

    // MARK: - A file with several names (Volume+LinkNames)

    /// Makes `Documents/h` a second name of `f` through the volume, as the kernel's LINK does.
    func linked(_ f: Fixture) throws {
        let (item, _) = try withName("h") { try f.volume.link(f.file, f.documents, $0) }
        #expect(item === f.file)
        settle(f)
    }

    /// The watcher reads what is queued, and the kernel takes what it was told.
    func settle(_ f: Fixture) {
        f.watcher.readQueue()
        _ = f.observer.flush()
    }

    /// Some name removed in the store: every item is due for a check at its next open.
    func removeSomethingInStore(_ f: Fixture) {
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/x", contents: Data())
        #expect(unlink(f.documentsPath + "/x") == 0)
    }

    func replaceInStore(_ f: Fixture, _ name: String) {
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/new", contents: Data("saved".utf8))
        #expect(rename(f.documentsPath + "/new", f.documentsPath + "/" + name) == 0)
    }

    @Test func anotherNameReplacedInTheStoreIsSeenByAnOpen() throws {
        let f = try Fixture()
        try linked(f)
        replaceInStore(f, "h")                               // f still leads to the file
        f.watcher.readQueue()
        #expect(f.volume.wasReplacedInStore(f.file))         // the open may have come through h
        #expect(f.volume.mayBeReachedThroughOldName(f.file)) // until the kernel dropped h
        #expect(f.observer.flush().contains("left h"))
        #expect(f.volume.mayBeReachedThroughOldName(f.file)) // an OPEN sent before may be on its way
        usleep(200_000)                                      // Volume.oldNameGrace
        #expect(!f.volume.mayBeReachedThroughOldName(f.file))
        #expect(!f.volume.wasReplacedInStore(f.file))        // h is no longer its name
    }

    @Test func anotherNameMovedAwayInTheStoreIsSeenByAnOpen() throws {
        let f = try Fixture()
        try linked(f)
        #expect(rename(f.documentsPath + "/h", f.documentsPath + "/k") == 0)
        f.watcher.readQueue()
        #expect(f.volume.wasReplacedInStore(f.file))
        _ = f.observer.flush()
        #expect(!f.volume.wasReplacedInStore(f.file))
    }

    @Test func aLookUpOfALinkMadeInTheStoreRecordsTheName() throws {
        let f = try Fixture()
        #expect(link(f.documentsPath + "/f", f.documentsPath + "/h") == 0)
        let (item, _) = try withName("h") { try f.volume.lookup(f.documents, $0) }
        #expect(item === f.file)                             // known by f, and now by h
        settle(f)
        replaceInStore(f, "h")
        f.watcher.readQueue()
        #expect(f.volume.wasReplacedInStore(f.file))
    }

    @Test func theKnownNameRemovedThroughTheMountHandsOverToAnother() throws {
        let f = try Fixture()
        try linked(f)
        try withName("f") { try f.volume.unlink(f.documents, $0) }
        removeSomethingInStore(f)
        settle(f)
        #expect(!f.volume.wasReplacedInStore(f.file))        // known by h now, which leads to it
        #expect(f.file.placement?.name == "h")
        replaceInStore(f, "h")
        f.watcher.readQueue()
        #expect(f.volume.wasReplacedInStore(f.file))
    }

    @Test func anotherNameRenamedThroughTheMountIsFollowed() throws {
        let f = try Fixture()
        try linked(f)
        try f.rename("h", "k")                               // the kernel now holds f and k
        settle(f)
        #expect(f.file.placement?.name == "f")
        replaceInStore(f, "k")
        f.watcher.readQueue()
        #expect(f.volume.wasReplacedInStore(f.file))
        _ = f.observer.flush()
        #expect(!f.volume.wasReplacedInStore(f.file))
        replaceInStore(f, "f")                               // and f is still checked
        f.watcher.readQueue()
        #expect(f.volume.wasReplacedInStore(f.file))
    }

    @Test func anotherNameReplacedThroughTheMountIsNotChecked() throws {
        let f = try Fixture()
        try linked(f)
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/g", contents: Data())
        let (g, _) = try withName("g") { try f.volume.lookup(f.documents, $0) }
        try f.rename("g", "h")                               // h is g's now; the kernel knows
        settle(f)
        removeSomethingInStore(f)
        settle(f)
        #expect(!f.volume.wasReplacedInStore(f.file))        // no needless ESTALE for h
        #expect(!f.volume.wasReplacedInStore(g))
    }
}
