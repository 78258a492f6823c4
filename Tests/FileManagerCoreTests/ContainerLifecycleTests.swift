import FileManagerCore
import Foundation
import Glibc
import Synchronization
import SystemPackage
import Testing

/// What a `StoreChangeHooks` was told, in order.
final class ChangeLog: Sendable {
    let entries = Mutex<[String]>([])
    let open = Mutex<Set<UInt64>>([])

    var hooks: StoreChangeHooks {
        StoreChangeHooks(
            entry: { change, body in
                try body()
                self.entries.withLock { $0.append("entry \(change.parent) \(change.name) \(change.path) \(change.deleting)") }
            },
            announce: { path, appeared in self.entries.withLock { $0.append("\(appeared ? "appeared" : "deleted") \(path)") } },
            isOpen: { inode in self.open.withLock { $0.contains(inode) } })
    }
}

@Suite("Inbox delivery, purge, item replacement directories, runs (no mount)")
struct ContainerLifecycleTests {
    let notes = BundleIdentifier("com.example.notes")!

    func made() throws -> (TemporaryStore, ContainerRegistry) {
        let t = try TemporaryStore()
        let registry = ContainerRegistry(store: t.store)
        try registry.create(notes, caller: .current)
        return (t, registry)
    }

    func inode(_ path: String) -> UInt64 {
        var st = stat()
        lstat(path, &st)
        return UInt64(st.st_ino)
    }

    @Test func collisionNamesInsertTheNumberBeforeTheFirstDot() {
        let cases: [(String, Int, String)] = [
            ("a.txt", 1, "a.txt"), ("a.txt", 2, "a.2.txt"), ("archive.tar.gz", 3, "archive.3.tar.gz"),
            ("README", 2, "README.2"), (".profile", 2, ".profile.2"), (".config.json", 4, ".config.4.json"),
            ("..", 2, "...2"), ("a.", 2, "a.2."),
        ]
        for (name, n, expected) in cases {
            #expect(CollisionNames.candidate(FilePath.Component(name)!, n).string == expected, "\(name) \(n)")
        }
    }

    @Test func deliveryCopiesDataModeAndTimesAndNeverOverwrites() throws {
        let (t, registry) = try made()
        let source = t.storePath("source.txt")
        try "hello\n".write(toFile: source, atomically: false, encoding: .utf8)
        chmod(source, 0o640)
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 5), timespec(tv_sec: 2_000_000, tv_nsec: 7)]
        utimensat(AT_FDCWD, source, &times, 0)
        let log = ChangeLog()
        let progress = Mutex<[Int64]>([])
        let first = try registry.deliver(FilePath(source), to: notes, caller: .current, hooks: log.hooks) { done, total in
            progress.withLock { $0.append(done); $0.append(total) }
        }
        let second = try registry.deliver(FilePath(source), to: notes, caller: .current)
        #expect(first.string == "source.txt")
        #expect(second.string == "source.2.txt")
        #expect(progress.withLock { $0.suffix(2) } == [6, 6])
        let inbox = t.storePath("containers/com.example.notes/Documents/Inbox")
        for name in ["source.txt", "source.2.txt"] {
            #expect(try String(contentsOfFile: "\(inbox)/\(name)", encoding: .utf8) == "hello\n")
            var st = stat()
            stat("\(inbox)/\(name)", &st)
            #expect(st.st_mode & 0o7777 == 0o640)
            #expect(st.st_mtim.tv_sec == 2_000_000 && st.st_mtim.tv_nsec == 7)
        }
        #expect(log.entries.withLock { $0 } == ["entry \(inode(inbox)) source.txt containers/com.example.notes/Documents/Inbox/source.txt false",
                                                "appeared containers/com.example.notes/Documents/Inbox/source.txt"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.storePath(".staging")).isEmpty)
    }

    @Test func deliveryRefusesDirectoriesUnknownContainersAndOthersContainers() throws {
        let (t, registry) = try made()
        let source = t.storePath("f")
        FileManager.default.createFile(atPath: source, contents: Data("x".utf8))
        #expect(throws: FileManagerError.isADirectory("\(t.path) (only files can be delivered)")) {
            _ = try registry.deliver(t.path, to: notes, caller: .current)
        }
        #expect(throws: FileManagerError.noSuchItem("containers/com.example.none")) {
            _ = try registry.deliver(FilePath(source), to: BundleIdentifier("com.example.none")!, caller: .current)
        }
        let stranger = Caller(uid: getuid() == 4242 ? 4343 : 4242, gid: 4242)
        #expect(throws: FileManagerError.permissionDenied("containers/com.example.notes: only its owner (uid \(getuid())) or root may deliver into its Inbox")) {
            _ = try registry.deliver(FilePath(source), to: notes, caller: stranger)
        }
        #expect(throws: FileManagerError.noSuchItem(t.storePath("missing"))) {
            _ = try registry.deliver(FilePath(t.storePath("missing")), to: notes, caller: .current)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.storePath("containers/com.example.notes/Documents/Inbox")).isEmpty)
    }

    @Test func purgeKeepsOpenItemsAndTheDirectoriesHoldingThem() throws {
        let (t, registry) = try made()
        let tmp = t.storePath("containers/com.example.notes/tmp")
        let caches = t.storePath("containers/com.example.notes/Library/Caches")
        try FileManager.default.createDirectory(atPath: "\(tmp)/d/e", withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: "\(tmp)/d/open", contents: Data("12".utf8))
        FileManager.default.createFile(atPath: "\(tmp)/d/e/f", contents: Data("1234".utf8))
        FileManager.default.createFile(atPath: "\(tmp)/h", contents: Data("123".utf8))
        FileManager.default.createFile(atPath: "\(caches)/c", contents: Data("1".utf8))
        let log = ChangeLog()
        log.open.withLock { _ = $0.insert(inode("\(tmp)/d/open")) }
        let report = try registry.purge([notes], areas: .tmp, caller: .current, hooks: log.hooks)
        var expected = PurgeReport()
        expected.items = 3  // d/e, d/e/f, h
        expected.bytes = 7
        expected.skipped = 2  // d/open and d
        #expect(report == expected)
        #expect(try FileManager.default.subpathsOfDirectory(atPath: tmp).sorted() == ["d", "d/open"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: caches) == ["c"])
        #expect(log.entries.withLock { $0 }.filter { $0.hasPrefix("deleted") }.sorted() == [
            "deleted containers/com.example.notes/tmp/d/e", "deleted containers/com.example.notes/tmp/h"])

        // Nothing open: both areas, every container of the caller's; the directories stay.
        let all = try registry.purge(nil, areas: .all, caller: .current)
        #expect(all.items == 3 && all.bytes == 3 && all.skipped == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: caches).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.storePath(".staging")).isEmpty)
    }

    @Test func purgeChecksTheContainerAndItsOwner() throws {
        let (_, registry) = try made()
        #expect(throws: FileManagerError.noSuchItem("containers/com.example.none")) {
            _ = try registry.purge([BundleIdentifier("com.example.none")!], areas: .all, caller: .current)
        }
        let stranger = Caller(uid: getuid() == 4242 ? 4343 : 4242, gid: 4242)
        #expect(throws: FileManagerError.permissionDenied("containers/com.example.notes: only its owner (uid \(getuid())) or root may purge it")) {
            _ = try registry.purge([notes], areas: .all, caller: stranger)
        }
        // With no id, a user purges their own containers only: none here.
        #expect(try registry.purge(nil, areas: .all, caller: stranger) == PurgeReport())
    }

    @Test func itemReplacementDirectoriesAreFreshAndPrivate() throws {
        let (t, registry) = try made()
        let first = try registry.makeItemReplacementDirectory(in: notes, caller: .current)
        let second = try registry.makeItemReplacementDirectory(in: notes, caller: .current)
        let third = try registry.makeItemReplacementDirectory(in: notes, caller: .current, program: "Notes")
        let base = "containers/com.example.notes/tmp/TemporaryItems/(A Document Being Saved By "
        #expect(first.string == base + "containerfs)")
        #expect(second.string == base + "containerfs) 2")
        #expect(third.string == base + "Notes)")
        for path in [first, second, third] {
            var st = stat()
            #expect(stat(t.path.pushing(path).string, &st) == 0)
            #expect(st.st_mode & 0o7777 == 0o700 && st.st_uid == getuid())
        }
    }

    @Test func runningProgramsAreTheLiveOnesRecorded() throws {
        let (_, registry) = try made()
        #expect(registry.runningPrograms(of: notes) == [])
        try registry.recordRun(of: notes, pid: getpid())
        // A process that has ended: recorded while alive, pruned once gone.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sleep")
        process.arguments = ["0.2"]
        try process.run()
        try registry.recordRun(of: notes, pid: process.processIdentifier)
        #expect(registry.runningPrograms(of: notes) == [getpid(), process.processIdentifier].sorted())
        process.waitUntilExit()
        #expect(registry.runningPrograms(of: notes) == [getpid()])
        #expect(registry.runningPrograms(of: BundleIdentifier("com.example.other")!) == [])
        #expect(throws: FileManagerError.noSuchItem("containers/com.example.none")) {
            try registry.recordRun(of: BundleIdentifier("com.example.none")!, pid: getpid())
        }
    }
}
