import FileManagerCore
import Glibc
import SystemPackage
import Testing

/// docs/SEMANTICS.md §8: creating directories and files.
@Suite("CoreFileManager: creating")
struct CoreFileManagerCreatingTests {
    let fm = CoreFileManager()

    // MARK: - 1. createDirectory results

    @Test("createDirectory: existing directory, missing parent, a file in the path (test 1)")
    func createDirectoryResults() throws {
        let p = try Playground {
            Directory("existing")
            File("file")
        }
        try fm.createDirectory(at: p["existing"], withIntermediateDirectories: true)
        #expect(throws: FileManagerError.itemExists(p["existing"].string)) {
            try fm.createDirectory(at: p["existing"], withIntermediateDirectories: false)
        }
        #expect(throws: FileManagerError.noSuchItem(p["missing/child"].string)) {
            try fm.createDirectory(at: p["missing/child"], withIntermediateDirectories: false)
        }
        #expect(throws: FileManagerError.notADirectory(p["file"].string)) {
            try fm.createDirectory(at: p["file/child/grandchild"], withIntermediateDirectories: true)
        }
        #expect(throws: FileManagerError.notADirectory(p["file/child"].string)) {
            try fm.createDirectory(at: p["file/child"], withIntermediateDirectories: false)
        }
        #expect(throws: FileManagerError.itemExists(p["file"].string)) {
            try fm.createDirectory(at: p["file"], withIntermediateDirectories: true)
        }
        try fm.createDirectory(at: p["a/b/c"], withIntermediateDirectories: true)
        #expect(try statOf(p["a/b/c"]).st_mode & S_IFMT == S_IFDIR)
    }

    @Test("createDirectory: relative paths, `.` and the root are refused")
    func createDirectoryRefusals() throws {
        #expect(throws: FileManagerError.invalidArgument("relative/dir")) {
            try fm.createDirectory(at: "relative/dir", withIntermediateDirectories: true)
        }
        #expect(throws: FileManagerError.invalidArgument("")) {
            try fm.createDirectory(at: "", withIntermediateDirectories: true)
        }
        #expect(throws: FileManagerError.invalidArgument("/")) {
            try fm.createDirectory(at: "/", withIntermediateDirectories: false)
        }
    }

    // MARK: - 2. Attributes on intermediates

    @Test("createDirectory: attributes land on every created intermediate, not on existing ones (test 2)")
    func attributesOnIntermediates() throws {
        let p = try Playground { Directory("top", mode: 0o755) }
        let before = try lstatOf(p["top"])
        let date = FileTimestamp(seconds: 1_000_000_000, nanoseconds: 500)
        let attributes = FileAttributeChanges(posixPermissions: 0o750, modificationDate: date)
        try fm.createDirectory(at: p["top/a/b/c"], withIntermediateDirectories: true, attributes: attributes)
        for path in [p["top/a"], p["top/a/b"], p["top/a/b/c"]] {
            let st = try lstatOf(path)
            #expect(st.st_mode & 0o7777 == 0o750, "\(path)")
            #expect(FileTimestamp(st.st_mtim) == date, "\(path)")
        }
        #expect(try lstatOf(p["top"]).st_mode & 0o7777 == before.st_mode & 0o7777)
    }

    @Test("createDirectory: a read-only mode on intermediates does not block the next level")
    func readOnlyIntermediates() throws {
        let p = try Playground()
        try fm.createDirectory(at: p["x/y"], withIntermediateDirectories: true,
                               attributes: FileAttributeChanges(posixPermissions: 0o555), caller: otherCallerOrRoot(p))
        #expect(try lstatOf(p["x"]).st_mode & 0o7777 == 0o555)
        #expect(try lstatOf(p["x/y"]).st_mode & 0o7777 == 0o555)
    }

    /// The other user when the tests can switch to it (its playground made writable for it).
    private func otherCallerOrRoot(_ p: Playground) -> Caller {
        guard runsAsRoot else { return .current }
        _ = chown(p.root.string, otherCaller.uid, otherCaller.gid)
        return otherCaller
    }

    // MARK: - 3. Mode, owner, group

    @Test("Modes come from the caller's umask, never the process's (test 3)")
    func modesFromCallerUmask() throws {
        let p = try Playground()
        let open = Caller(uid: getuid(), gid: getgid(), umask: 0)
        try fm.createDirectory(at: p["open"], withIntermediateDirectories: false, caller: open)
        #expect(fm.createFile(at: p["open.txt"], contents: [1], caller: open))
        #expect(try lstatOf(p["open"]).st_mode & 0o7777 == 0o777)
        #expect(try lstatOf(p["open.txt"]).st_mode & 0o7777 == 0o666)

        let strict = Caller(uid: getuid(), gid: getgid(), umask: 0o077)
        try fm.createDirectory(at: p["strict/inner"], withIntermediateDirectories: true, caller: strict)
        #expect(fm.createFile(at: p["strict.txt"], contents: [1], caller: strict))
        #expect(try lstatOf(p["strict"]).st_mode & 0o7777 == 0o700)
        #expect(try lstatOf(p["strict/inner"]).st_mode & 0o7777 == 0o700)
        #expect(try lstatOf(p["strict.txt"]).st_mode & 0o7777 == 0o600)
    }

    @Test("New items belong to the caller; a setgid parent gives its group (test 3)", .enabled(if: runsAsRoot))
    func ownerIsCaller() throws {
        let p = try Playground {
            Directory("mine")
            Directory("shared", mode: 0o2777)
        }
        _ = chown(p["mine"].string, 4242, 4242)
        _ = chown(p["shared"].string, 0, 5555)
        _ = chmod(p["shared"].string, 0o2777)  // chown cleared setgid
        let caller = Caller(uid: 4242, gid: 4343, umask: 0o027)
        try fm.createDirectory(at: p["mine/dir"], withIntermediateDirectories: false, caller: caller)
        #expect(fm.createFile(at: p["mine/file"], contents: Array("x".utf8), caller: caller))
        try fm.createSymbolicLink(at: p["mine/link"], withDestinationPath: "file", caller: caller)
        for (name, mode) in [("mine/dir", 0o750), ("mine/file", 0o640)] as [(String, mode_t)] {
            let st = try lstatOf(p[name])
            #expect(st.st_uid == 4242 && st.st_gid == 4343, "\(name)")
            #expect(st.st_mode & 0o7777 == mode, "\(name)")
        }
        #expect(try lstatOf(p["mine/link"]).st_uid == 4242)

        try fm.createDirectory(at: p["shared/dir"], withIntermediateDirectories: false, caller: caller)
        let st = try lstatOf(p["shared/dir"])
        #expect(st.st_uid == 4242 && st.st_gid == 5555)
        #expect(st.st_mode & 0o7777 == 0o2750)  // the inherited setgid bit stays
    }

    // MARK: - 4. createFile

    @Test("createFile overwrites an existing file in place and returns true (test 4)")
    func createFileOverwritesInPlace() throws {
        let p = try Playground {
            File("f", "a longer original text", mode: 0o600)
        }
        let before = try lstatOf(p["f"])
        #expect(fm.createFile(at: p["f"], contents: Array("new".utf8)))
        let after = try lstatOf(p["f"])
        #expect(after.st_ino == before.st_ino)
        #expect(after.st_mode & 0o7777 == 0o600)
        #expect(text(p["f"]) == "new")
    }

    @Test("createFile writes a new file whole, leaving no temporary behind")
    func createFileNew() throws {
        let p = try Playground()
        let date = FileTimestamp(seconds: 1_234_567_890)
        #expect(fm.createFile(at: p["new.bin"], contents: [0, 1, 2, 255],
                              attributes: FileAttributeChanges(posixPermissions: 0o640, modificationDate: date)))
        #expect(fm.contents(atPath: p["new.bin"]) == [0, 1, 2, 255])
        let st = try lstatOf(p["new.bin"])
        #expect(st.st_mode & 0o7777 == 0o640)
        #expect(FileTimestamp(st.st_mtim) == date)
        #expect(rawListing(p.root) == ["new.bin"])
        #expect(fm.createFile(at: p["empty"]))
        #expect(try lstatOf(p["empty"]).st_size == 0)
    }

    @Test("createFile refuses a directory, a missing parent and a symlink, with the reason")
    func createFileFailures() throws {
        let p = try Playground {
            Directory("dir")
            File("target", "keep")
            SymbolicLink("link", to: "target")
        }
        #expect(!fm.createFile(at: p["dir"], contents: [1]))
        #expect(throws: FileManagerError.isADirectory(p["dir"].string)) {
            try fm.writeFile(at: p["dir"], contents: [1])
        }
        #expect(throws: FileManagerError.noSuchItem(p["missing/f"].string)) {
            try fm.writeFile(at: p["missing/f"], contents: [1])
        }
        #expect(throws: FileManagerError.system(.tooManySymbolicLinkLevels, p["link"].string)) {
            try fm.writeFile(at: p["link"], contents: [1])
        }
        #expect(text(p["target"]) == "keep")
        #expect(rawListing(p.root) == ["dir", "link", "target"])
    }

    // MARK: - 25. Names as bytes

    @Test("Non-UTF-8 and NFC/NFD names round-trip as distinct names (test 25)")
    func namesAreBytes() throws {
        let p = try Playground()
        let latin1: [CChar] = [0x63, 0x61, 0x66, CChar(bitPattern: 0xE9), 0]  // "café" in Latin-1
        let raw = latin1.withUnsafeBufferPointer { FilePath.Component(platformString: $0.baseAddress!)! }
        let nfc = FilePath.Component("\u{E9}t\u{E9}")
        let nfd = FilePath.Component("e\u{301}te\u{301}")
        for name in [raw, nfc, nfd] {
            #expect(fm.createFile(at: p.root.appending(name), contents: Array(name.string.utf8)))
        }
        let listed = try fm.contentsOfDirectory(atPath: p.root)
        #expect(Set(listed) == [raw, nfc, nfd])
        #expect(fm.fileExists(atPath: p.root.appending(raw)))
        #expect(fm.contents(atPath: p.root.appending(nfd)) == Array(nfd.string.utf8))
        let moved: [CChar] = [0x63, 0x61, 0x66, CChar(bitPattern: 0xE9), 0x32, 0]
        let raw2 = moved.withUnsafeBufferPointer { FilePath.Component(platformString: $0.baseAddress!)! }
        try fm.moveItem(at: p.root.appending(raw), to: p.root.appending(raw2))
        try fm.removeItem(at: p.root.appending(nfc))
        #expect(Set(try fm.contentsOfDirectory(atPath: p.root)) == [raw2, nfd])
        #expect(fm.contents(atPath: p.root.appending(raw2)) == Array(raw.string.utf8))
    }

    @Test("A 256-byte name is nameTooLong; 255 bytes is fine (test 25)")
    func nameTooLong() throws {
        let p = try Playground()
        let long = p[String(repeating: "n", count: 256)]
        let longest = p[String(repeating: "n", count: 255)]
        #expect(throws: FileManagerError.nameTooLong(long.string)) { try fm.writeFile(at: long, contents: []) }
        #expect(throws: FileManagerError.nameTooLong(long.string)) {
            try fm.createDirectory(at: long, withIntermediateDirectories: false)
        }
        #expect(throws: FileManagerError.nameTooLong(long.string)) {
            try fm.createDirectory(at: long, withIntermediateDirectories: true)
        }
        #expect(throws: FileManagerError.nameTooLong(long.string)) { try fm.attributesOfItem(atPath: long) }
        #expect(fm.createFile(at: longest, contents: []))
        #expect(fm.fileExists(atPath: longest))
    }
}
