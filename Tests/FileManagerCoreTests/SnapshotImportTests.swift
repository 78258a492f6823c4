@testable import FileManagerCore
import Foundation
import Glibc
import SystemPackage
import Testing

/// The archive adapter of `snapshot import` (docs/DESIGN.md 54) and the manifest behind
/// `snapshot verify` (55): hostile archives, written here byte by byte as ustar, are refused
/// whole; an exported tree comes back as it was.
@Suite("Snapshot import")
struct SnapshotImportTests {
    typealias Scratch = FileWrapperTests.Scratch

    /// A ustar archive, one 512-byte header per member, built by hand so that a test can
    /// write what no well-behaved writer would.
    struct Ustar {
        var bytes: [UInt8] = []

        static func octal(_ value: Int, _ width: Int) -> [UInt8] {
            var digits = Array(String(value, radix: 8).utf8)
            while digits.count < width - 1 { digits.insert(0x30, at: 0) }
            return digits + [0]
        }

        mutating func add(_ name: String, type: Character = "0", data: [UInt8] = [], link: String = "", mode: Int = 0o644) {
            var h = [UInt8](repeating: 0, count: 512)
            func put(_ field: [UInt8], _ at: Int) { for (i, b) in field.enumerated() { h[at + i] = b } }
            put(Array(name.utf8), 0)
            put(Self.octal(mode, 8), 100)
            put(Self.octal(0, 8), 108)
            put(Self.octal(0, 8), 116)
            put(Self.octal(data.count, 12), 124)
            put(Self.octal(1_600_000_000, 12), 136)
            h[156] = UInt8(type.asciiValue!)
            put(Array(link.utf8), 157)
            put(Array("ustar\u{0}00".utf8), 257)
            put([UInt8](repeating: 0x20, count: 8), 148)
            let sum = h.reduce(0) { $0 + Int($1) }
            put(Self.octal(sum, 7) + [0x20], 148)
            bytes += h
            bytes += data
            bytes += [UInt8](repeating: 0, count: (512 - data.count % 512) % 512)
        }

        mutating func end() { bytes += [UInt8](repeating: 0, count: 1024) }
    }

    /// Extracts `archive` into `s/staged`; the error, or nil.
    func extract(_ s: Scratch, _ archive: [UInt8]) -> FileManagerError? {
        let file = s.path + "/in.tar"
        _ = FileManager.default.createFile(atPath: file, contents: Data(archive))
        let fd = open(file, O_RDONLY)
        defer { close(fd) }
        do {
            _ = try SnapshotArchive.extract(fd, into: s.fd, Array("staged".utf8), label: "in.tar",
                                            ownership: .init(caller: .current))
            return nil
        } catch {
            return error
        }
    }

    func refusal(_ build: (inout Ustar) -> Void) -> (FileManagerError?, Bool) {
        let s = try! Scratch()
        var u = Ustar()
        build(&u)
        let error = extract(s, u.bytes)
        return (error, access(s.path + "/staged", F_OK) == 0)
    }

    @Test func hostileArchivesAreRefusedWholeNamingTheMemberAndTheReason() {
        let cases: [(String, (inout Ustar) -> Void)] = [
            ("/etc/evil: refused, an absolute path", { u in u.add("x/", type: "5"); u.add("/etc/evil"); u.end() }),
            ("x/../../e: refused, a '..' component in its path", { u in u.add("x/", type: "5"); u.add("x/../../e"); u.end() }),
            ("x/l: refused, a symbolic link leading outside the snapshot (../../etc)",
             { u in u.add("x/", type: "5"); u.add("x/l", type: "2", link: "../../etc"); u.end() }),
            ("x/l: refused, a symbolic link to an absolute path (/etc)",
             { u in u.add("x/", type: "5"); u.add("x/l", type: "2", link: "/etc"); u.end() }),
            ("x/e: refused, a symbolic link leading outside the snapshot (d/d/../..)",
             { u in u.add("x/", type: "5"); u.add("x/d", type: "2", link: "."); u.add("x/e", type: "2", link: "d/d/../.."); u.end() }),
            ("x/l/f: refused, its path goes through the symbolic link x/l",
             { u in u.add("x/", type: "5"); u.add("x/s/", type: "5"); u.add("x/l", type: "2", link: "s"); u.add("x/l/f"); u.end() }),
            ("x/a/f: refused, its path goes through the file x/a",
             { u in u.add("x/", type: "5"); u.add("x/a"); u.add("x/a/f"); u.end() }),
            ("x/c: refused, a character device", { u in u.add("x/", type: "5"); u.add("x/c", type: "3"); u.end() }),
            ("x/b: refused, a block device", { u in u.add("x/", type: "5"); u.add("x/b", type: "4"); u.end() }),
            ("x/p: refused, a FIFO", { u in u.add("x/", type: "5"); u.add("x/p", type: "6"); u.end() }),
            ("x/a: refused, a duplicate member", { u in u.add("x/", type: "5"); u.add("x/a"); u.add("x/a"); u.end() }),
            ("x/h: refused, a hard link to x/n, which is not an earlier file member",
             { u in u.add("x/", type: "5"); u.add("x/h", type: "1", link: "x/n"); u.add("x/n"); u.end() }),
            ("x/h: refused, a hard link to x/, which is not an earlier file member",
             { u in u.add("x/", type: "5"); u.add("x/h", type: "1", link: "x/"); u.end() }),
            ("x/a: refused, a damaged or truncated archive (Truncated tar archive)",
             { u in u.add("x/", type: "5"); u.add("x/a", data: [UInt8](repeating: 7, count: 2000)); u.bytes.removeLast(1024) }),
            ("the end after x/a: refused, a truncated archive (no end-of-archive blocks)",
             { u in u.add("x/", type: "5"); u.add("x/a", data: [1, 2, 3]) }),
            ("the member after x/: refused, a damaged or truncated archive (Damaged tar archive)",
             { u in u.add("x/", type: "5"); u.add("x/a"); u.end(); u.bytes[512 + 148] ^= 1 }),
        ]
        for (message, build) in cases {
            let (error, left) = refusal(build)
            #expect(error == .invalidArgument("in.tar: " + message))
            #expect(!left, "\(message): the staged tree must be gone")
        }
    }

    @Test func linksInsideTheRootHardLinksAndImpliedDirectoriesAreKept() throws {
        let s = try Scratch()
        var u = Ustar()
        u.add("x/a/b/f", data: Array("data".utf8), mode: 0o640)
        u.add("x/h", type: "1", link: "x/a/b/f")
        u.add("x/l", type: "2", link: "a/b/../b/f")
        u.add("x/a/", type: "5", mode: 0o750)
        u.end()
        #expect(extract(s, u.bytes) == nil)
        #expect(s.read("staged/x/l") == "data")
        #expect(s.stat("staged/x/h").st_ino == s.stat("staged/x/a/b/f").st_ino)
        #expect(s.stat("staged/x/a/b/f").st_mode & 0o7777 == 0o640)
        #expect(s.stat("staged/x/a").st_mode & 0o7777 == 0o750)
        #expect(s.stat("staged/x/a/b").st_mode & 0o7777 == 0o755)
        #expect(s.stat("staged/x/a/b/f").st_mtim.tv_sec == 1_600_000_000)
    }

    @Test func anExportedTreeImportsAsItWasAndExportsToTheSameBytes() throws {
        let s = try Scratch()
        mkdir(s.path + "/tree", 0o755)
        mkdir(s.path + "/tree/d", 0o700)
        s.write("tree/a", "ay")
        s.write("tree/d/big", String(repeating: "z", count: 200_000))
        #expect(link(s.path + "/tree/a", s.path + "/tree/d/a2") == 0)
        #expect(symlink("../a", s.path + "/tree/d/l") == 0)
        #expect(s.setXattr("tree/a", "user.colour", "blue"))
        // Whole seconds: restricted pax keeps sub-second times only where it writes an
        // extended header anyway (decision 53).
        for p in ["tree/d/l", "tree/d/big", "tree/a", "tree/d", "tree"] {
            var t = (timespec(tv_sec: 1_500_000_000, tv_nsec: 0), timespec(tv_sec: 1_500_000_000, tv_nsec: 0))
            _ = withUnsafePointer(to: &t) { utimensat(AT_FDCWD, s.path + "/" + p, UnsafeRawPointer($0).assumingMemoryBound(to: timespec.self), AT_SYMLINK_NOFOLLOW) }
        }
        let first = open(s.path + "/one.tar", O_RDWR | O_CREAT | O_TRUNC, 0o644)
        defer { close(first) }
        try SnapshotArchive.export(s.fd, "tree", to: first, display: "tree")
        lseek(first, 0, SEEK_SET)
        let extracted = try SnapshotArchive.extract(first, into: s.fd, Array("staged".utf8), label: "one.tar",
                                                    ownership: .init(caller: .current))
        #expect(extracted.top == Array("tree".utf8))
        #expect(extracted.totals == SnapshotArchive.ImportTotals(members: 6, files: 3, bytes: 200_002))
        let original = try FileWrapper(directory: s.fd, name: Array("tree".utf8))
        let staged = open(s.path + "/staged", O_PATH | O_DIRECTORY)
        defer { close(staged) }
        #expect(original.matchesContents(of: staged, name: Array("tree".utf8)))
        let second = open(s.path + "/two.tar", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        defer { close(second) }
        try SnapshotArchive.export(staged, "tree", to: second, display: "tree")
        #expect(FileManager.default.contents(atPath: s.path + "/one.tar") == FileManager.default.contents(atPath: s.path + "/two.tar"))
    }

    @Test func importPublishesWithAManifestThatVerifyChecks() throws {
        let t = try TemporaryStore()
        let s = try Scratch()
        var u = Ustar()
        u.add("snap/", type: "5", mode: 0o755)
        u.add("snap/f", data: Array("one".utf8))
        u.end()
        _ = FileManager.default.createFile(atPath: s.path + "/in.tar", contents: Data(u.bytes))
        let fd = open(s.path + "/in.tar", O_RDONLY)
        defer { close(fd) }
        let snapshots = Snapshots(store: t.store)
        let record = try snapshots.importArchive(fd, label: "in.tar", caller: .current)
        #expect(record.name == "snap" && record.source == "import:in.tar" && record.files == 1 && record.bytes == 3)
        #expect(snapshots.list().map(\.name) == ["snap"])
        #expect(try snapshots.verify() == [Snapshots.Verification(name: "snap", state: .intact, changes: [])])
        lseek(fd, 0, SEEK_SET)
        #expect(throws: FileManagerError.itemExists("snapshots/snap")) { try snapshots.importArchive(fd, label: "in.tar", caller: .current) }
        // An edit in the store that keeps size and time: the change time tells.
        let file = t.storePath("snapshots/snap/f")
        var st = Glibc.stat()
        stat(file, &st)
        let w = open(file, O_WRONLY)
        _ = pwrite(w, "ONE", 3, 0)
        var times = (st.st_atim, st.st_mtim)
        _ = withUnsafePointer(to: &times) { futimens(w, UnsafeRawPointer($0).assumingMemoryBound(to: timespec.self)) }
        close(w)
        #expect(try snapshots.verify("snap") == [Snapshots.Verification(name: "snap", state: .damaged, changes: ["f: changed (ctime)"])])
        #expect(snapshots.isDamaged("snap"))
        try snapshots.remove("snap", caller: .current)
        #expect(snapshots.manifest("snap") == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: t.storePath(".staging")).isEmpty)
    }

    @Test func diffNamesEachKindOfChange() throws {
        let s = try Scratch()
        for dir in ["old", "new"] {
            mkdir(s.path + "/" + dir, 0o755)
            s.write(dir + "/same", "same")
            s.write(dir + "/gone-or-added", "x")
            s.write(dir + "/data", dir)
        }
        unlink(s.path + "/new/gone-or-added")
        s.write("new/fresh", "f")
        #expect(chmod(s.path + "/new/same", 0o600) == 0)
        var t = (timespec(tv_sec: 1_500_000_000, tv_nsec: 0), timespec(tv_sec: 1_500_000_000, tv_nsec: 0))
        for p in ["old/same", "new/same", "old/data", "new/data", "old", "new"] {
            _ = withUnsafePointer(to: &t) { utimensat(AT_FDCWD, s.path + "/" + p, UnsafeRawPointer($0).assumingMemoryBound(to: timespec.self), 0) }
        }
        let d = try Snapshots.diff(snapshot: s.fd, Array("old".utf8), live: s.fd, Array("new".utf8),
                                   source: "containers/com.example.a/Documents", display: "old", liveDisplay: "new")
        #expect(d == [
            SnapshotDifference(path: "data", change: .changed, what: ["content"]),
            SnapshotDifference(path: "fresh", change: .added, what: []),
            SnapshotDifference(path: "gone-or-added", change: .removed, what: []),
            SnapshotDifference(path: "same", change: .changed, what: ["mode"]),
        ])
    }
}
