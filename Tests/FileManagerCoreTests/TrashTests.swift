@testable import FileManagerCore
import Foundation
import Glibc
import SystemPackage
import Testing

/// The trash without a mount (docs/DESIGN.md 48-51): the info file codec, collision names,
/// trash → list → restore → empty on a store, and the journal settling what a crash left.
@Suite("Trash: info files, naming, operations and journal recovery (no mount)")
struct TrashTests {
    // MARK: - TrashInfo codec

    @Test(arguments: [
        Array("containers/com.example.notes/Documents/a b.txt".utf8),
        Array("containers/com.example.notes/Documents/line\nbreak".utf8),
        Array("containers/com.example.notes/Documents/100%.txt".utf8),
        Array("containers/com.example.notes/Documents/".utf8) + [0xFF, 0xFE, 0x80, 0x41],
        Array("containers/com.example.notes/Documents/caf\u{E9} \u{1F600}%2F".utf8),
        Array("containers/x/Documents/a=b[c]#?&+~".utf8),
    ])
    func infoRoundTrips(_ path: [UInt8]) throws {
        let date = TrashInfo.parseDate("2026-12-07T10:11:12")!
        let info = TrashInfo(path: path, deletionDate: date)
        let bytes = info.encoded
        // The file is three plain lines: nothing of the path leaks out unencoded.
        let lines = bytes.split(separator: 10, omittingEmptySubsequences: false)
        #expect(lines.count == 4 && lines[3].isEmpty)
        #expect(Array(lines[0]) == Array("[Trash Info]".utf8))
        #expect(Array(lines[2]) == Array("DeletionDate=2026-12-07T10:11:12".utf8))
        #expect(!lines[1].contains(0x20) && lines[1].allSatisfy { $0 < 0x80 })
        #expect(try TrashInfo.parse(bytes) == info)
    }

    @Test func percentEncodingIsExact() {
        #expect(TrashInfo.percentEncoded(Array("a b%\n/é".utf8)) == Array("a%20b%25%0A/%C3%A9".utf8))
        #expect(TrashInfo.percentEncoded([0xFF, 0x00]) == Array("%FF%00".utf8))
        #expect(TrashInfo.percentDecoded(Array("a%20b%2f%c3%A9".utf8)[...]) == Array("a b/é".utf8))
        #expect(TrashInfo.percentDecoded(Array("bad%2".utf8)[...]) == nil)
        #expect(TrashInfo.percentDecoded(Array("bad%zz".utf8)[...]) == nil)
        #expect(TrashInfo.percentDecoded(Array("%".utf8)[...]) == nil)
    }

    @Test func parseToleratesWhatTheSpecificationAllows() throws {
        // CRLF, other groups and keys, keys repeated (the first wins), no date (1970).
        let text = "# comment\r\n[Other]\r\nPath=/etc/passwd\r\n[Trash Info]\r\nX-Extra=1\r\nPath=containers/a/Documents/f\r\nPath=containers/b/Documents/g\r\n"
        let info = try TrashInfo.parse(Array(text.utf8))
        #expect(info.path == Array("containers/a/Documents/f".utf8))
        #expect(info.deletionDate == 0)
    }

    @Test(arguments: [
        ("Path=containers/a/Documents/f\nDeletionDate=2026-01-01T00:00:00\n", TrashInfo.Problem.notTrashInfo),
        ("[Trash Info]\nDeletionDate=2026-01-01T00:00:00\n", .missingPath),
        ("[Trash Info]\nPath=\nDeletionDate=2026-01-01T00:00:00\n", .missingPath),
        ("[Trash Info]\nPath=containers/a/%G1\nDeletionDate=2026-01-01T00:00:00\n", .badEncoding),
        ("[Trash Info]\nPath=/etc/passwd\nDeletionDate=2026-01-01T00:00:00\n", .absolutePath),
        ("[Trash Info]\nPath=%2Fetc%2Fpasswd\n", .absolutePath),
        ("[Trash Info]\nPath=containers/a/../../etc\n", .escapingPath),
        ("[Trash Info]\nPath=containers/a/./f\n", .escapingPath),
        ("[Trash Info]\nPath=containers//f\n", .escapingPath),
        ("[Trash Info]\nPath=containers/a/f/\n", .escapingPath),
        ("[Trash Info]\nPath=containers/a/x%00y\n", .escapingPath),
        ("[Trash Info]\nPath=.Trash-0/files/x\n", .otherTrash),
        ("[Trash Info]\nPath=.Trash/x\n", .otherTrash),
        ("[Trash Info]\nPath=containers/a/Documents/f\nDeletionDate=yesterday\n", .badDate),
        ("[Trash Info]\nPath=containers/a/Documents/f\nDeletionDate=2026-13-01T00:00:00\n", .badDate),
        ("[Trash Info]\nPath=containers/a/Documents/f\nDeletionDate=2026-01-01 00:00:00\n", .badDate),
    ])
    func parseRefuses(_ text: String, _ problem: TrashInfo.Problem) {
        #expect(throws: problem) { try TrashInfo.parse(Array(text.utf8)) }
    }

    @Test func dateFormatAndParse() {
        let t = time(nil)
        let text = TrashInfo.formatDate(t)
        #expect(text.utf8.count == 19)
        #expect(TrashInfo.parseDate(text) == t)
        #expect(TrashInfo.formatDate(TrashInfo.parseDate("2024-02-29T23:59:58")!) == "2024-02-29T23:59:58")
        for bad in ["", "2026-01-01", "2026-01-01T00:00", "2026-00-01T00:00:00", "2026-01-32T00:00:00",
                    "2026-01-01T24:00:00", "2026-01-01T00:60:00", "2026/01/01T00:00:00", "2026-01-01T00:00:0x",
                    "2026-01-01T00:00:00Z"] {
            #expect(TrashInfo.parseDate(bad) == nil, "\(bad)")
        }
    }

    // MARK: - TrashNaming

    @Test func collisionNames() {
        func c(_ name: String, _ attempt: Int) -> String { String(decoding: TrashNaming.candidate(Array(name.utf8), attempt: attempt), as: UTF8.self) }
        #expect(c("a.tar.gz", 0) == "a.tar.gz")
        #expect(c("a.tar.gz", 1) == "a.2.tar.gz")
        #expect(c("a.tar.gz", 2) == "a.3.tar.gz")
        #expect(c(".bashrc", 1) == ".bashrc.2")
        #expect(c(".config.old", 1) == ".config.2.old")
        #expect(c("notes", 1) == "notes.2")
        #expect(c("notes", 9) == "notes.10")
        #expect(TrashNaming.infoName(Array("a".utf8)) == Array("a.trashinfo".utf8))
        #expect(TrashNaming.trashName(ofInfo: Array("a.b.trashinfo".utf8)) == Array("a.b".utf8))
        #expect(TrashNaming.trashName(ofInfo: Array(".trashinfo".utf8)) == nil)
        #expect(TrashNaming.trashName(ofInfo: Array("a.txt".utf8)) == nil)
    }

    @Test func longNamesLeaveRoomForTheInfoSuffix() {
        #expect(TrashNaming.maximumLength == 245)
        let long = [UInt8](repeating: 0x61, count: 246) + Array(".txt".utf8)  // 250 bytes
        var seen = Set<[UInt8]>()
        for attempt in [0, 1, 9, 99, 9999] {
            let name = TrashNaming.candidate(long, attempt: attempt)
            #expect(name.count <= 245, "attempt \(attempt): \(name.count) bytes")
            #expect(name.count + TrashNaming.infoName([]).count <= 255)
            #expect(Array(name.suffix(4)) == Array(".txt".utf8), "the extension stays")
            seen.insert(name)
        }
        #expect(seen.count == 5, "every attempt a different name")
        // Nearly all extension: the extension itself is cut.
        let ext = Array("a.".utf8) + [UInt8](repeating: 0x62, count: 248)
        #expect(TrashNaming.candidate(ext, attempt: 3).count <= 245)
        #expect(TrashNaming.candidate(Array("short".utf8), attempt: 0) == Array("short".utf8))
    }

    // MARK: - TrashCan on a store

    static let id = "com.example.notes"
    static let docs = "containers/\(id)/Documents"

    /// A store with one container's Documents.
    func makeStore() throws -> TemporaryStore {
        let t = try TemporaryStore()
        try FileManager.default.createDirectory(atPath: t.storePath(Self.docs), withIntermediateDirectories: true)
        return t
    }

    func can(_ t: TemporaryStore) -> TrashCan { TrashCan(items: TrashPlace(store: t.store), store: t.store, uid: getuid()) }
    func trashDir(_ t: TemporaryStore) -> String { t.storePath("trash/.Trash-\(getuid())") }
    func ls(_ path: String) -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }
    func write(_ path: String, _ text: String) { FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) }
    func read(_ path: String) -> String? { (try? Data(contentsOf: URL(fileURLWithPath: path))).map { String(decoding: $0, as: UTF8.self) } }
    func journalRows(_ t: TemporaryStore) throws -> Int64 {
        guard case .int(let n) = try t.store.database.execute("SELECT count(*) FROM journal").first?.first else { return -1 }
        return n
    }
    func b(_ s: String) -> [UInt8] { Array(s.utf8) }

    @Test func trashListRestoreEmpty() throws {
        let t = try makeStore()
        let trash = can(t)
        write(t.storePath("\(Self.docs)/a.txt"), "hello")
        try FileManager.default.createDirectory(atPath: t.storePath("\(Self.docs)/dir/sub"), withIntermediateDirectories: true)
        write(t.storePath("\(Self.docs)/dir/sub/f"), "12345678")

        let item = try trash.trash(b("\(Self.docs)/a.txt"))
        #expect(item.name == b("a.txt"))
        #expect(item.path.string == "\(trashDir(t))/files/a.txt")
        #expect(!FileManager.default.fileExists(atPath: t.storePath("\(Self.docs)/a.txt")))
        #expect(read("\(trashDir(t))/files/a.txt") == "hello")
        let info = try TrashInfo.parse(b(read("\(trashDir(t))/info/a.txt.trashinfo") ?? ""))
        #expect(info.path == b("\(Self.docs)/a.txt"))
        #expect(abs(Int(info.deletionDate) - Int(time(nil))) < 5)
        _ = try trash.trash(b("\(Self.docs)/dir"))
        #expect(try journalRows(t) == 0)

        let entries = try trash.list()
        #expect(entries.map(\.name) == [b("a.txt"), b("dir")])
        #expect(entries.allSatisfy { $0.problem == nil })
        #expect(entries[0].size == 5 && !entries[0].isDirectory)
        #expect(entries[1].size == 8 && entries[1].isDirectory)
        #expect(entries[1].info?.path == b("\(Self.docs)/dir"))

        // Restore brings it back where it was, and its info file goes.
        let back = try trash.restore(b("a.txt"))
        #expect(back.string == t.storePath("\(Self.docs)/a.txt"))
        #expect(read(t.storePath("\(Self.docs)/a.txt")) == "hello")
        #expect(ls("\(trashDir(t))/files") == ["dir"])
        #expect(ls("\(trashDir(t))/info") == ["dir.trashinfo"])
        // Missing directories on the way back are made again, inside the container.
        _ = try trash.trash(b("\(Self.docs)/a.txt"))
        try FileManager.default.removeItem(atPath: t.storePath(Self.docs))
        _ = try trash.restore(b("a.txt"))
        #expect(read(t.storePath("\(Self.docs)/a.txt")) == "hello")

        let emptied = try trash.empty()
        #expect(emptied.removed == [b("dir")] && emptied.bytes == 8 && emptied.failures.isEmpty)
        #expect(ls("\(trashDir(t))/files").isEmpty && ls("\(trashDir(t))/info").isEmpty)
        #expect(ls("\(trashDir(t))/expunged").isEmpty)
        #expect(try trash.list().isEmpty)
        #expect(try journalRows(t) == 0)
        #expect(throws: FileManagerError.self) { _ = try trash.empty([b("nothing")]) }
    }

    @Test func collisionsGetNumberedNames() throws {
        let t = try makeStore()
        let trash = can(t)
        var names: [String] = []
        for i in 0..<3 {
            write(t.storePath("\(Self.docs)/a.tar.gz"), "v\(i)")
            names.append(String(decoding: try trash.trash(b("\(Self.docs)/a.tar.gz")).name, as: UTF8.self))
        }
        #expect(names == ["a.tar.gz", "a.2.tar.gz", "a.3.tar.gz"])
        // An info file alone (another program's) takes its name too.
        write("\(trashDir(t))/info/notes.trashinfo", "[Trash Info]\nPath=containers/x/Documents/notes\n")
        write(t.storePath("\(Self.docs)/notes"), "n")
        #expect(try trash.trash(b("\(Self.docs)/notes")).name == b("notes.2"))
        #expect(read("\(trashDir(t))/files/a.2.tar.gz") == "v1")
        // Each restores to the one original place, in turn.
        _ = try trash.restore(b("a.2.tar.gz"))
        #expect(read(t.storePath("\(Self.docs)/a.tar.gz")) == "v1")
        let listed = try trash.list()
        #expect(listed.first { $0.name == b("notes") }?.problem != nil, "the lone info file is listed as unusable")
    }

    @Test func restoreNeverOverwrites() throws {
        let t = try makeStore()
        let trash = can(t)
        write(t.storePath("\(Self.docs)/f"), "old")
        _ = try trash.trash(b("\(Self.docs)/f"))
        write(t.storePath("\(Self.docs)/f"), "new")
        #expect(throws: FileManagerError.self) { _ = try trash.restore(b("f")) }
        do {
            _ = try trash.restore(b("f"))
        } catch {
            guard case .itemExists = error else { Issue.record("expected itemExists, got \(error)"); return }
        }
        #expect(read(t.storePath("\(Self.docs)/f")) == "new")
        #expect(read("\(trashDir(t))/files/f") == "old")
        #expect(ls("\(trashDir(t))/info") == ["f.trashinfo"])
        #expect(try journalRows(t) == 0)
        // --to another name works.
        let to = try trash.restore(b("f"), to: b("\(Self.docs)/f.old"))
        #expect(to.string == t.storePath("\(Self.docs)/f.old"))
        #expect(read(t.storePath("\(Self.docs)/f.old")) == "old")
    }

    @Test func containerGoesAndComesBackWhole() throws {
        let t = try TemporaryStore()
        let registry = ContainerRegistry(store: t.store)
        try registry.create(BundleIdentifier(Self.id)!, caller: .current)
        write(t.storePath("\(Self.docs)/keep"), "k")
        let trash = can(t)
        let path = try registry.remove(BundleIdentifier(Self.id)!, permanently: false, force: false, caller: .current, trash: trash)
        #expect(path?.string == "\(trashDir(t))/files/\(Self.id)")
        #expect(registry.list().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: t.storePath("containers/\(Self.id)")))
        _ = try trash.restore(b(Self.id))
        #expect(registry.list().map(\.id) == [Self.id])
        #expect(read(t.storePath("\(Self.docs)/keep")) == "k")
        #expect(ls("\(trashDir(t))/info").isEmpty)
    }

    // MARK: - Journal recovery

    func journal(_ t: TemporaryStore, _ op: String, name: String, path: String) throws {
        try t.store.database.execute("INSERT INTO journal (op, uid, name, path, started) VALUES (?, ?, ?, ?, 0)",
                                     [.text(op), .int(Int64(getuid())), .text(TrashJournal.text(b(name))), .text(TrashJournal.text(b(path)))])
    }

    func info(_ path: String) -> String { String(decoding: TrashInfo(path: b(path), deletionDate: time(nil)).encoded, as: UTF8.self) }

    @Test func recoverySettlesATrashCutShort() throws {
        let t = try makeStore()
        write(t.storePath("\(Self.docs)/seed"), "s")
        _ = try can(t).trash(b("\(Self.docs)/seed"))  // makes the trash directory
        let tr = trashDir(t)
        // 1. Info reserved, item still in place: the info file goes, the item stays.
        write(t.storePath("\(Self.docs)/x y"), "x")
        write("\(tr)/info/x y.trashinfo", info("\(Self.docs)/x y"))
        try journal(t, "trash", name: "x y", path: "\(Self.docs)/x y")
        // 2. Moved, info written: it stays trashed, whole.
        write("\(tr)/files/moved", "m")
        write("\(tr)/info/moved.trashinfo", info("\(Self.docs)/moved"))
        try journal(t, "trash", name: "moved", path: "\(Self.docs)/moved")
        // 3. A name another program took meanwhile (its info file names another path): kept.
        write("\(tr)/info/other.trashinfo", info("containers/else/Documents/other"))
        try journal(t, "trash", name: "other", path: "\(Self.docs)/other")
        write(t.storePath("\(Self.docs)/other"), "o")
        // 4. A name that needs percent-encoding in the journal, info reserved, not moved.
        let odd = "\(Self.docs)/odd\u{7F}%"
        write(t.storePath(odd), "odd")
        write("\(tr)/info/odd\u{7F}%.trashinfo", info(odd))
        try journal(t, "trash", name: "odd\u{7F}%", path: odd)
        // 5. Killed between the info file's O_EXCL creation and its write: empty. Found by
        //    trash-crash-recovery (kill -9 of the daemon): it stayed, naming no item, for good.
        write(t.storePath("\(Self.docs)/empty"), "e")
        write("\(tr)/info/empty.trashinfo", "")
        try journal(t, "trash", name: "empty", path: "\(Self.docs)/empty")
        // 6. A beginning of the info file of this item: goes; one of another path's: stays.
        write(t.storePath("\(Self.docs)/part"), "p")
        write("\(tr)/info/part.trashinfo", "[Trash Info]\nPath=containers/com.exa")
        try journal(t, "trash", name: "part", path: "\(Self.docs)/part")
        write("\(tr)/info/notmine.trashinfo", "[Trash Info]\nPath=containers/else/")
        try journal(t, "trash", name: "notmine", path: "\(Self.docs)/notmine")
        #expect(try journalRows(t) == 7)

        #expect(t.store.settleJournal() == 7)
        #expect(read(t.storePath("\(Self.docs)/empty")) == "e")
        #expect(try journalRows(t) == 0)
        #expect(read(t.storePath("\(Self.docs)/x y")) == "x")
        #expect(read(t.storePath(odd)) == "odd")
        #expect(ls("\(tr)/info") == ["moved.trashinfo", "notmine.trashinfo", "other.trashinfo", "seed.trashinfo"])
        #expect(ls("\(tr)/files") == ["moved", "seed"])
        #expect(t.store.settleJournal() == 0)
    }

    @Test func recoverySettlesRestoreAndEmptyCutShort() throws {
        let t = try makeStore()
        let trash = can(t)
        for name in ["r1", "r2", "e1", "e2"] {
            write(t.storePath("\(Self.docs)/\(name)"), name)
            _ = try trash.trash(b("\(Self.docs)/\(name)"))
        }
        let tr = trashDir(t)
        // restore: r1 moved back, its info not yet removed; r2 not moved at all.
        try FileManager.default.moveItem(atPath: "\(tr)/files/r1", toPath: t.storePath("\(Self.docs)/r1"))
        try journal(t, "restore", name: "r1", path: "\(Self.docs)/r1")
        try journal(t, "restore", name: "r2", path: "\(Self.docs)/r2")
        // empty: e1 moved aside into expunged/ (a big tree), info still there; e2 not yet moved.
        try FileManager.default.createDirectory(atPath: "\(tr)/expunged/7/deep/er", withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: "\(tr)/files/e1", toPath: "\(tr)/expunged/7/deep/er/e1")
        for i in 0..<50 { write("\(tr)/expunged/7/f\(i)", "") }
        try journal(t, "empty", name: "e1", path: "\(Self.docs)/e1")
        try journal(t, "empty", name: "e2", path: "\(Self.docs)/e2")
        // A leftover of an empty no row speaks for any more.
        try FileManager.default.createDirectory(atPath: "\(tr)/expunged/3", withIntermediateDirectories: true)
        write("\(tr)/expunged/3/stray", "s")
        // Another user's trash in the store: its expunged/ is emptied too.
        try FileManager.default.createDirectory(atPath: t.storePath("trash/.Trash-4242/expunged/9"), withIntermediateDirectories: true)

        #expect(t.store.settleJournal() == 4)
        #expect(try journalRows(t) == 0)
        #expect(read(t.storePath("\(Self.docs)/r1")) == "r1")
        #expect(ls("\(tr)/files") == ["e2", "r2"])
        #expect(ls("\(tr)/info") == ["e2.trashinfo", "r2.trashinfo"])
        #expect(ls("\(tr)/expunged").isEmpty)
        #expect(ls(t.storePath("trash/.Trash-4242/expunged")).isEmpty)
        // What stays is whole: it restores and empties as usual.
        _ = try trash.restore(b("r2"))
        #expect(read(t.storePath("\(Self.docs)/r2")) == "r2")
        #expect(try trash.empty().removed == [b("e2")])
    }

    @Test func recoveryWithoutATrashDirectoryDropsTheRow() throws {
        let t = try makeStore()
        write(t.storePath("\(Self.docs)/f"), "f")
        try journal(t, "trash", name: "f", path: "\(Self.docs)/f")
        #expect(t.store.settleJournal() == 1)
        #expect(try journalRows(t) == 0, "the row goes even when the user has no trash directory")
        #expect(read(t.storePath("\(Self.docs)/f")) == "f")
    }
}
