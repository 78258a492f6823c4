import FileManagerCore
import Glibc
import SystemPackage
import Testing

/// docs/SEMANTICS.md §8.
@Suite("CoreFileManager: copy, move, link")
struct CoreFileManagerCopyMoveLinkTests {
    let fm = CoreFileManager()

    private func sampleTree() throws -> Playground {
        try Playground {
            Directory("src", mode: 0o750, xattrs: ["user.tag": "red"]) {
                File("a.txt", "alpha", mode: 0o600, xattrs: ["user.note": "n"])
                File(".hidden", "h")
                File("._fork", "f")
                SymbolicLink("link", to: "a.txt")
                Directory("sub") { File("b.txt", "beta") }
            }
            File("existing", "do not touch")
            Directory("existingDir") { File("inside", "keep") }
        }
    }

    // MARK: - Copy

    @Test("copyItem copies a tree with hidden files, modes, times, xattrs and links as links")
    func copyTree() throws {
        let p = try sampleTree()
        let srcTime = try lstatOf(p["src/a.txt"]).st_mtim
        #expect(try fm.copyItem(at: p["src"], to: p["dst"]))
        #expect(rawListing(p["dst"]) == rawListing(p["src"]))
        #expect(text(p["dst/a.txt"]) == "alpha")
        #expect(text(p["dst/sub/b.txt"]) == "beta")
        #expect(try lstatOf(p["dst"]).st_mode & 0o7777 == 0o750)
        #expect(try lstatOf(p["dst/a.txt"]).st_mode & 0o7777 == 0o600)
        #expect(FileTimestamp(try lstatOf(p["dst/a.txt"]).st_mtim) == FileTimestamp(srcTime))
        #expect(try fm.destinationOfSymbolicLink(atPath: p["dst/link"]) == "a.txt")
        #expect(try lstatOf(p["dst/a.txt"]).st_ino != lstatOf(p["src/a.txt"]).st_ino)
        #expect(fm.contentsEqual(atPath: p["src"], andPath: p["dst"]))
        #expect(rawListing(p.root) == ["dst", "existing", "existingDir", "src"])  // no temporary left
    }

    @Test("copyItem recreates a FIFO instead of reading it")
    func copyFIFO() throws {
        let p = try Playground { Directory("d") }
        #expect(mkfifo(p["d/pipe"].string, 0o640) == 0)
        try fm.copyItem(at: p["d"], to: p["copy"])
        let st = try lstatOf(p["copy/pipe"])
        #expect(st.st_mode & S_IFMT == S_IFIFO)
        #expect(st.st_mode & 0o7777 == 0o640)
    }

    @Test("copyItem, moveItem, linkItem, createSymbolicLink onto an existing name fail and change nothing (test 7)")
    func refuseExistingDestination() throws {
        let p = try sampleTree()
        for destination in [p["existing"], p["existingDir"]] {
            let error = FileManagerError.itemExists(destination.string)
            #expect(throws: error) { try fm.copyItem(at: p["src"], to: destination) }
            #expect(throws: error) { try fm.copyItem(at: p["src/a.txt"], to: destination) }
            #expect(throws: error) { try fm.moveItem(at: p["src"], to: destination) }
            #expect(throws: error) { try fm.moveItem(at: p["src/a.txt"], to: destination) }
            #expect(throws: error) { try fm.linkItem(at: p["src"], to: destination) }
            #expect(throws: error) { try fm.linkItem(at: p["src/a.txt"], to: destination) }
            #expect(throws: error) { try fm.createSymbolicLink(at: destination, withDestinationPath: "anything") }
        }
        #expect(text(p["existing"]) == "do not touch")
        #expect(rawListing(p["existingDir"]) == ["inside"])
        #expect(text(p["existingDir/inside"]) == "keep")
        #expect(fm.fileExists(atPath: p["src/a.txt"]))
        #expect(rawListing(p.root) == ["existing", "existingDir", "src"])
    }

    @Test("A symlink source: copy and move act on the link, the target stays put (test 8)")
    func symlinkSource() throws {
        let p = try Playground {
            Directory("target") { File("data", "d") }
            SymbolicLink("link", to: "target")
            SymbolicLink("dangling", to: "nowhere")
        }
        try fm.copyItem(at: p["link"], to: p["copy"])
        #expect(try lstatOf(p["copy"]).st_mode & S_IFMT == S_IFLNK)
        #expect(try fm.destinationOfSymbolicLink(atPath: p["copy"]) == "target")
        try fm.moveItem(at: p["link"], to: p["moved"])
        #expect(try lstatOf(p["moved"]).st_mode & S_IFMT == S_IFLNK)
        #expect(!fm.fileExists(atPath: p["link"]))
        try fm.copyItem(at: p["dangling"], to: p["dangling2"])
        #expect(try fm.destinationOfSymbolicLink(atPath: p["dangling2"]) == "nowhere")
        #expect(rawListing(p["target"]) == ["data"])
        #expect(try lstatOf(p["target"]).st_mode & S_IFMT == S_IFDIR)
    }

    @Test("Missing source, `.` and a directory copied into itself are refused")
    func copyRefusals() throws {
        let p = try sampleTree()
        #expect(throws: FileManagerError.noSuchItem(p["missing"].string)) { try fm.copyItem(at: p["missing"], to: p["x"]) }
        #expect(throws: FileManagerError.noSuchItem(p["missing"].string)) { try fm.moveItem(at: p["missing"], to: p["x"]) }
        #expect(throws: FileManagerError.invalidArgument(p["src/."].string)) { try fm.copyItem(at: p["src/."], to: p["x"]) }
        #expect(throws: FileManagerError.invalidArgument(p["src/sub/copy"].string)) {
            try fm.copyItem(at: p["src"], to: p["src/sub/copy"])
        }
        #expect(throws: FileManagerError.invalidArgument(p["src/sub/moved"].string)) {
            try fm.moveItem(at: p["src"], to: p["src/sub/moved"])
        }
        #expect(rawListing(p["src/sub"]) == ["b.txt"])
    }

    // MARK: - Move

    @Test("moveItem renames within a file system, keeping the inode")
    func moveKeepsInode() throws {
        let p = try sampleTree()
        let inode = try lstatOf(p["src"]).st_ino
        #expect(try fm.moveItem(at: p["src"], to: p["moved"]))
        #expect(try lstatOf(p["moved"]).st_ino == inode)
        #expect(!fm.fileExists(atPath: p["src"]))
    }

    @Test("moveItem between file systems copies, then removes, with the delegate's extra questions (test 9)",
          .enabled(if: (try? statOf("/dev/shm").st_dev) != nil && (try? statOf("/dev/shm").st_dev) != (try? statOf("/tmp").st_dev)))
    func moveAcrossFileSystems() throws {
        let p = try sampleTree()
        let far = try Playground(in: "/dev/shm")
        let spy = SpyDelegate()
        let manager = CoreFileManager(delegate: spy)
        #expect(try manager.moveItem(at: p["src"], to: far["src"]))
        #expect(!fm.fileExists(atPath: p["src"]))
        #expect(text(far["src/sub/b.txt"]) == "beta")
        #expect(try lstatOf(far["src/a.txt"]).st_mode & 0o7777 == 0o600)
        #expect(spy.log.moves.count == 1)
        #expect(spy.log.copies.count == 7)  // src and its six items
        #expect(spy.log.removals.count == 7)
        #expect(rawListing(far.root) == ["src"])
    }

    @Test("A move between file systems that fails mid-copy leaves the source whole and no destination (test 9)",
          .enabled(if: runsAsRoot && (try? statOf("/dev/shm").st_dev) != (try? statOf("/tmp").st_dev)))
    func failedMoveAcrossFileSystems() throws {
        let p = try sampleTree()
        for name in ["src", "src/a.txt", "src/.hidden", "src/._fork", "src/link", "src/sub"] {
            _ = lchown(p[name].string, 4242, 4242)
        }
        _ = chmod(p["src/sub/b.txt"].string, 0o000)  // root's, unreadable for the caller below
        let far = try Playground(in: "/dev/shm")
        _ = chown(far.root.string, 4242, 4242)
        #expect(throws: FileManagerError.permissionDenied(p["src/sub/b.txt"].string)) {
            try fm.moveItem(at: p["src"], to: far["src"], caller: otherCaller)
        }
        #expect(rawListing(far.root) == [])
        #expect(rawListing(p["src"]) == ["._fork", ".hidden", "a.txt", "link", "sub"])
        #expect(rawListing(p["src/sub"]) == ["b.txt"])
    }

    // MARK: - 6. Delegate for copy and move

    @Test("copy asks per item, move once for a directory; declines make both return true (test 6)")
    func copyAndMoveDelegate() throws {
        let p = try sampleTree()
        let spy = SpyDelegate(declining: [p["src/sub"]])
        let manager = CoreFileManager(delegate: spy)
        #expect(try manager.copyItem(at: p["src"], to: p["copy"]))
        #expect(spy.log.copies.count == 6)  // src, a.txt, .hidden, ._fork, link, sub (declined: not entered)
        #expect(spy.log.copies.contains { $0 == (p["src/a.txt"], p["copy/a.txt"]) })
        #expect(rawListing(p["copy"]) == ["._fork", ".hidden", "a.txt", "link"])

        let declinesTop = SpyDelegate(declining: [p["src"]])
        #expect(try CoreFileManager(delegate: declinesTop).copyItem(at: p["src"], to: p["copy2"]))
        #expect(!fm.fileExists(atPath: p["copy2"]))
        #expect(try CoreFileManager(delegate: declinesTop).moveItem(at: p["src"], to: p["moved"]))
        #expect(!fm.fileExists(atPath: p["moved"]))
        #expect(declinesTop.log.moves.count == 1)

        let mover = SpyDelegate()
        #expect(try CoreFileManager(delegate: mover).moveItem(at: p["src"], to: p["moved"]))
        #expect(mover.log.moves.count == 1)
        #expect(mover.log.moves.first?.0 == p["src"] && mover.log.moves.first?.1 == p["moved"])
        #expect(mover.log.copies.isEmpty && mover.log.removals.isEmpty)
    }

    // MARK: - Link

    @Test("linkItem: a new directory whose files are hard links and whose symlinks are copies")
    func linkDirectory() throws {
        let p = try sampleTree()
        let spy = SpyDelegate()
        #expect(try CoreFileManager(delegate: spy).linkItem(at: p["src"], to: p["linked"]))
        #expect(spy.log.links.count == 7)
        #expect(try lstatOf(p["linked"]).st_ino != lstatOf(p["src"]).st_ino)
        #expect(try lstatOf(p["linked"]).st_mode & 0o7777 == 0o750)
        #expect(try lstatOf(p["linked/a.txt"]).st_ino == lstatOf(p["src/a.txt"]).st_ino)
        #expect(try lstatOf(p["linked/a.txt"]).st_nlink == 2)
        #expect(try lstatOf(p["linked/sub/b.txt"]).st_ino == lstatOf(p["src/sub/b.txt"]).st_ino)
        #expect(try lstatOf(p["linked/link"]).st_ino != lstatOf(p["src/link"]).st_ino)
        #expect(try fm.destinationOfSymbolicLink(atPath: p["linked/link"]) == "a.txt")

        try fm.linkItem(at: p["existing"], to: p["hard"])
        #expect(try lstatOf(p["hard"]).st_ino == lstatOf(p["existing"]).st_ino)
    }

    // MARK: - Symbolic links

    @Test("createSymbolicLink stores the destination unresolved; destinationOfSymbolicLink returns it as is")
    func symbolicLinks() throws {
        let p = try Playground { File("f") }
        try fm.createSymbolicLink(at: p["rel"], withDestinationPath: "../not/there yet")
        #expect(try fm.destinationOfSymbolicLink(atPath: p["rel"]) == "../not/there yet")
        try fm.createSymbolicLink(at: p["abs"], withDestinationPath: p["f"])
        #expect(try fm.destinationOfSymbolicLink(atPath: p["abs"]) == p["f"])
        #expect(throws: FileManagerError.invalidArgument(p["f"].string)) { try fm.destinationOfSymbolicLink(atPath: p["f"]) }
        #expect(throws: FileManagerError.itemExists(p["rel"].string)) {
            try fm.createSymbolicLink(at: p["rel"], withDestinationPath: "other")
        }
    }
}
