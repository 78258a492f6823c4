import FileManagerCore
import Glibc
import SystemPackage
import Testing

/// docs/SEMANTICS.md §8.
@Suite("CoreFileManager: attributes, contents, display names")
struct CoreFileManagerAttributesTests {
    let fm = CoreFileManager()

    @Test("attributesOfItem reports a link itself; every field matches lstat")
    func attributesOfItem() throws {
        let p = try Playground {
            File("f", "12345", mode: 0o640)
            SymbolicLink("link", to: "f")
            Directory("d")
        }
        _ = link(p["f"].string, p["hardlink"].string)
        let st = try lstatOf(p["f"])
        let a = try fm.attributesOfItem(atPath: p["f"])
        #expect(a.type == .regular)
        #expect(a.size == 5)
        #expect(a.posixPermissions == 0o640)
        #expect(a.referenceCount == 2)
        #expect(a.systemFileNumber == UInt64(st.st_ino))
        #expect(a.systemNumber == UInt64(st.st_dev))
        #expect(a.ownerAccountID == st.st_uid && a.groupOwnerAccountID == st.st_gid)
        #expect(a.modificationDate == FileTimestamp(st.st_mtim))
        if st.st_uid == 0 { #expect(a.ownerAccountName == "root") }
        #expect(try fm.attributesOfItem(atPath: p["link"]).type == .symbolicLink)  // test 18
        #expect(try fm.attributesOfItem(atPath: p["link"]).size == 1)
        #expect(try fm.attributesOfItem(atPath: p["d"]).type == .directory)
        #expect(try fm.attributesOfItem(atPath: "/").type == .directory)
        #expect(throws: FileManagerError.noSuchItem(p["missing"].string)) { try fm.attributesOfItem(atPath: p["missing"]) }
    }

    @Test("A FIFO is .unknown; a device node is .characterSpecial with its device number")
    func specialTypes() throws {
        let p = try Playground()
        _ = mkfifo(p["fifo"].string, 0o600)
        #expect(try fm.attributesOfItem(atPath: p["fifo"]).type == .unknown)
        let null = try fm.attributesOfItem(atPath: "/dev/null")
        #expect(null.type == .characterSpecial)
        #expect(null.deviceIdentifier == UInt64(try lstatOf("/dev/null").st_rdev))
    }

    @Test("The creation date: the birth time, or what setAttributes stored")
    func creationDate() throws {
        let p = try Playground { File("f") }
        let born = try fm.attributesOfItem(atPath: p["f"]).creationDate
        if let born { #expect(born <= FileTimestamp.now) }
        let date = FileTimestamp(seconds: 981_173_106, nanoseconds: 123_456_789)
        try fm.setAttributes(FileAttributeChanges(creationDate: date), ofItemAtPath: p["f"])
        #expect(try fm.attributesOfItem(atPath: p["f"]).creationDate == date)
    }

    @Test("setAttributes on a symlink changes the target (test 18)")
    func setAttributesFollowsLink() throws {
        let p = try Playground {
            File("target", mode: 0o644)
            SymbolicLink("link", to: "target")
        }
        let date = FileTimestamp(seconds: 1_600_000_000)
        try fm.setAttributes(FileAttributeChanges(posixPermissions: 0o600, modificationDate: date), ofItemAtPath: p["link"])
        let target = try fm.attributesOfItem(atPath: p["target"])
        #expect(target.posixPermissions == 0o600)
        #expect(target.modificationDate == date)
        #expect(try fm.attributesOfItem(atPath: p["link"]).type == .symbolicLink)
        #expect(throws: FileManagerError.noSuchItem(p["dangling"].string)) {
            try fm.setAttributes(FileAttributeChanges(posixPermissions: 0o600), ofItemAtPath: p["dangling"])
        }
    }

    @Test("Attributes read from one item can be passed to setAttributes of another")
    func roundTrip() throws {
        let p = try Playground {
            File("a", mode: 0o604)
            File("b", mode: 0o644)
        }
        try fm.setAttributes(FileAttributeChanges(modificationDate: FileTimestamp(seconds: 42), extensionHidden: true), ofItemAtPath: p["a"])
        try fm.setAttributes(FileAttributeChanges(try fm.attributesOfItem(atPath: p["a"])), ofItemAtPath: p["b"])
        let b = try fm.attributesOfItem(atPath: p["b"])
        #expect(b.posixPermissions == 0o604)
        #expect(b.modificationDate == FileTimestamp(seconds: 42))
        #expect(b.extensionHidden)
    }

    @Test("setAttributes tries every change and reports the refused one (test 19)", .enabled(if: runsAsRoot))
    func partialFailure() throws {
        let p = try Playground { File("f", mode: 0o644) }
        _ = chown(p["f"].string, 4242, 4242)
        let changes = FileAttributeChanges(posixPermissions: 0o600, ownerAccountID: 0, modificationDate: FileTimestamp(seconds: 7))
        #expect(throws: FileManagerError.system(.notPermitted, p["f"].string)) {
            try fm.setAttributes(changes, ofItemAtPath: p["f"], caller: otherCaller)
        }
        let st = try lstatOf(p["f"])
        #expect(st.st_uid == 4242)
        #expect(st.st_mode & 0o7777 == 0o600)  // tried after the refused chown
        #expect(st.st_mtim.tv_sec == 7)
    }

    @Test("attributesOfFileSystem on a symlink reports the link's own file system (test 18)",
          .enabled(if: (try? statOf("/dev/shm").st_dev) != (try? statOf("/tmp").st_dev)))
    func fileSystemOfLink() throws {
        let p = try Playground { SymbolicLink("elsewhere", to: "/dev/shm") }
        let fs = try fm.attributesOfFileSystem(forPath: p["elsewhere"])
        #expect(fs.systemNumber == UInt64(try lstatOf(p.root).st_dev))
        #expect(fs.systemNumber != UInt64(try statOf("/dev/shm").st_dev))
        #expect(fs.size > 0 && fs.freeSize <= fs.size && fs.nodes > 0)
    }

    // MARK: - 23. contentsEqual

    @Test("contentsEqual: hard links, equal link targets, trees, and differences (test 23)")
    func contentsEqual() throws {
        let p = try Playground {
            File("a", "same")
            File("b", "same")
            File("c", "diff")
            SymbolicLink("l1", to: "nowhere")
            SymbolicLink("l2", to: "nowhere")
            SymbolicLink("l3", to: "a")
            Directory("t1") { File("x", "1"); Directory("s") { File("._y", "2") } }
            Directory("t2") { File("x", "1"); Directory("s") { File("._y", "2") } }
            Directory("t3") { File("x", "1"); Directory("s") { File("._y", "3") } }
        }
        _ = link(p["a"].string, p["hard"].string)
        _ = chmod(p["a"].string, 0o000)  // not read: the same inode is equal without reading
        #expect(fm.contentsEqual(atPath: p["a"], andPath: p["hard"]))
        _ = chmod(p["a"].string, 0o644)
        #expect(fm.contentsEqual(atPath: p["a"], andPath: p["b"]))
        #expect(!fm.contentsEqual(atPath: p["a"], andPath: p["c"]))
        #expect(fm.contentsEqual(atPath: p["l1"], andPath: p["l2"]))
        #expect(!fm.contentsEqual(atPath: p["l1"], andPath: p["l3"]))
        #expect(!fm.contentsEqual(atPath: p["l3"], andPath: p["a"]))  // the link itself, not its target
        #expect(fm.contentsEqual(atPath: p["t1"], andPath: p["t2"]))
        #expect(!fm.contentsEqual(atPath: p["t1"], andPath: p["t3"]))
        #expect(!fm.contentsEqual(atPath: p["a"], andPath: p["missing"]))
    }

    @Test("contents(atPath:) reads through a link; nil for a directory or a missing file")
    func contents() throws {
        let p = try Playground {
            File("f", "data")
            SymbolicLink("l", to: "f")
            Directory("d")
        }
        #expect(fm.contents(atPath: p["l"]) == Array("data".utf8))
        #expect(fm.contents(atPath: p["d"]) == nil)
        #expect(fm.contents(atPath: p["missing"]) == nil)
    }

    // MARK: - 24. Display names

    @Test("displayName of a missing path is the input; componentsToDisplay is nil (test 24)")
    func displayNames() throws {
        let p = try Playground { File("Report.txt") }
        #expect(fm.displayName(atPath: p["missing/thing.txt"]) == p["missing/thing.txt"].string)
        #expect(fm.componentsToDisplay(forPath: p["missing"]) == nil)
        #expect(fm.displayName(atPath: p["Report.txt"]) == "Report.txt")
        try fm.setAttributes(FileAttributeChanges(extensionHidden: true), ofItemAtPath: p["Report.txt"])
        #expect(fm.displayName(atPath: p["Report.txt"]) == "Report")
        #expect(fm.componentsToDisplay(forPath: p["Report.txt"])?.last == "Report")
    }
}
