import FileManagerCore
import Foundation
import Glibc
import SystemPackage
import Testing

@Suite("Store, containers and volume primitives (no mount)")
struct VolumeTests {
    @Test func containerCreationLaysOutTheStandardDirectories() throws {
        let t = try TemporaryStore()
        let registry = ContainerRegistry(store: t.store)
        try registry.create(BundleIdentifier("com.example.notes")!, caller: .current)
        for dir in ["Notes.app", "Documents", "Documents/Inbox", "Library", "Library/Application Support",
                    "Library/Caches", "Library/Preferences", "tmp"] {
            var isDir: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: t.storePath("containers/com.example.notes/\(dir)"), isDirectory: &isDir) && isDir.boolValue, "\(dir)")
        }
        var st = stat()
        stat(t.storePath("containers/com.example.notes"), &st)
        #expect(st.st_mode & 0o7777 == 0o700)
        #expect(registry.list().map(\.id) == ["com.example.notes"])
        #expect(throws: FileManagerError.itemExists("containers/com.example.notes")) {
            try registry.create(BundleIdentifier("com.example.notes")!, caller: .current)
        }
        // nothing left half-made in staging after the refused creation
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.storePath(".staging")).isEmpty)
    }

    @Test func reconcileRestoresRecordsAndDropsStaleOnes() throws {
        let t = try TemporaryStore()
        let registry = ContainerRegistry(store: t.store)
        try FileManager.default.createDirectory(atPath: t.storePath("containers/org.direct.edit"), withIntermediateDirectories: false)
        try t.store.database.execute("INSERT INTO containers VALUES ('com.gone.app', 'Gone', 0, 0)")
        registry.reconcile()
        #expect(registry.list().map(\.id) == ["org.direct.edit"])
    }

    @Test func removeDeletesTheWholeContainer() throws {
        let t = try TemporaryStore()
        let registry = ContainerRegistry(store: t.store)
        let id = BundleIdentifier("com.example.mail")!
        try registry.create(id, caller: .current)
        FileManager.default.createFile(atPath: t.storePath("containers/com.example.mail/Documents/._x"), contents: Data("x".utf8))
        try registry.remove(id)
        #expect(!FileManager.default.fileExists(atPath: t.storePath("containers/com.example.mail")))
        #expect(registry.list().isEmpty)
        #expect(throws: FileManagerError.noSuchItem("containers/com.example.mail")) { try registry.remove(id) }
    }

    @Test func aSecondLockOfTheStoreFailsNamingTheHolder() throws {
        let t = try TemporaryStore()
        let held = try t.store.acquireLock(mountPoint: "/mnt/x")
        let second = try Store(at: t.path)
        #expect(throws: FileManagerError.self) { _ = try second.acquireLock(mountPoint: "/mnt/y") }
        #expect(second.lockHolder()?.contains("mounted at /mnt/x") == true)
        withExtendedLifetime(held) {}
    }

    @Test func purgeRemovesOnlyOldTemporaryItems() throws {
        let t = try TemporaryStore()
        let registry = ContainerRegistry(store: t.store)
        try registry.create(BundleIdentifier("com.example.notes")!, caller: .current)
        let tmp = t.storePath("containers/com.example.notes/tmp")
        FileManager.default.createFile(atPath: tmp + "/old", contents: Data())
        FileManager.default.createFile(atPath: tmp + "/new", contents: Data())
        var times = [timespec(tv_sec: 1000, tv_nsec: 0), timespec(tv_sec: 1000, tv_nsec: 0)]
        utimensat(AT_FDCWD, tmp + "/old", &times, 0)
        #expect(registry.purgeTemporaryItems(olderThan: 3 * 24 * 3600) == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp) == ["new"])
    }

    @Test func lookupCreateRenameAndPolicyThroughTheVolume() throws {
        let t = try TemporaryStore()
        let volume = Volume(store: t.store)
        let caller = Caller.current
        let (containers, _) = try withName("containers") { try volume.lookup(volume.root, $0) }
        let (notes, _) = try withName("com.example.notes") { try volume.mkdir(containers, $0, mode: 0o755, caller: caller) }
        #expect(volume.zone(of: notes) == .container(notes.inode))
        let (documents, _) = try withName("Documents") { try volume.lookup(notes, $0) }
        let (file, st, handle) = try withName("a.txt") { try volume.create(documents, $0, mode: 0o644, flags: O_WRONLY, caller: caller) }
        #expect(UInt64(st.st_ino) == file.inode)
        #expect(volume.item(file.inode) === file)
        _ = handle
        // rename keeps the inode and moves the item's zone along
        let (inbox, _) = try withName("Inbox") { try volume.lookup(documents, $0) }
        try withName("a.txt") { a in try withName("b.txt") { b in try volume.rename(documents, a, documents, b, flags: 0) } }
        let (renamed, st2) = try withName("b.txt") { try volume.lookup(documents, $0) }
        #expect(renamed === file && UInt64(st2.st_ino) == file.inode)
        // into Inbox: EACCES; bundle: EROFS; bad container id: EINVAL; name too long
        #expect(errnoOf { try withName("b.txt") { b in try volume.rename(documents, b, inbox, b, flags: 0) } } == .permissionDenied)
        let (bundle, _) = try withName("Notes.app") { try volume.lookup(notes, $0) }
        #expect(errnoOf { _ = try withName("x") { try volume.mkdir(bundle, $0, mode: 0o755, caller: caller) } } == .readOnlyFileSystem)
        #expect(errnoOf { _ = try withName("not_an_id") { try volume.mkdir(containers, $0, mode: 0o755, caller: caller) } } == .invalidArgument)
        #expect(errnoOf { _ = try withName(String(repeating: "n", count: 256)) { try volume.lookup(documents, $0) } } == .fileNameTooLong)
        #expect(errnoOf { try withName("Documents") { try volume.rmdir(notes, $0) } } == .permissionDenied)
    }

    @Test func aDirectoryMovedOutOfInboxLeavesItsInboxZone() throws {
        let t = try TemporaryStore()
        let registry = ContainerRegistry(store: t.store)
        try registry.create(BundleIdentifier("com.example.notes")!, caller: .current)
        // delivered directly into the store (as `inbox deliver` will)
        try FileManager.default.createDirectory(atPath: t.storePath("containers/com.example.notes/Documents/Inbox/d"), withIntermediateDirectories: false)
        FileManager.default.createFile(atPath: t.storePath("containers/com.example.notes/Documents/Inbox/d/f"), contents: Data("x".utf8))
        let volume = Volume(store: t.store)
        let (containers, _) = try withName("containers") { try volume.lookup(volume.root, $0) }
        let (notes, _) = try withName("com.example.notes") { try volume.lookup(containers, $0) }
        let (documents, _) = try withName("Documents") { try volume.lookup(notes, $0) }
        let (inbox, _) = try withName("Inbox") { try volume.lookup(documents, $0) }
        let (d, _) = try withName("d") { try volume.lookup(inbox, $0) }
        let (f, _) = try withName("f") { try volume.lookup(d, $0) }
        #expect(volume.zone(of: f) == .inbox(notes.inode))
        #expect(errnoOf { _ = try volume.open(f, flags: O_WRONLY) } == .permissionDenied)
        try withName("d") { n in try volume.rename(inbox, n, documents, n, flags: 0) }
        #expect(volume.zone(of: f) == .contents(notes.inode))
        #expect(errnoOf { _ = try volume.open(f, flags: O_WRONLY) } == nil)
    }
}
