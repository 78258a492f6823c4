import FileManagerCore
import Glibc
import SystemPackage
import Testing

/// docs/SEMANTICS.md §8: replaceItem.
@Suite("CoreFileManager: replacing")
struct CoreFileManagerReplacingTests {
    let fm = CoreFileManager()

    @Test("An existing backup-named item is removed first; the backup is deleted on success (test 10)")
    func backupDeletedByDefault() throws {
        let p = try Playground {
            Directory("docs") {
                File("report", "old")
                Directory("report~") { File("stale") }
            }
            Directory("staging") { File("report.new", "new") }
        }
        let result = try fm.replaceItem(at: p["docs/report"], withItemAt: p["staging/report.new"], backupItemName: "report~")
        #expect(result == p["docs/report"])
        #expect(text(p["docs/report"]) == "new")
        #expect(rawListing(p["docs"]) == ["report"])
        #expect(rawListing(p["staging"]) == [])
    }

    @Test("withoutDeletingBackupItem leaves the old contents under the backup name (test 10)")
    func backupKept() throws {
        let p = try Playground {
            File("report", "old")
            File("report~", "older")
            File("report.new", "new")
        }
        try fm.replaceItem(at: p["report"], withItemAt: p["report.new"], backupItemName: "report~",
                           options: .withoutDeletingBackupItem)
        #expect(text(p["report"]) == "new")
        #expect(text(p["report~"]) == "old")
        #expect(rawListing(p.root) == ["report", "report~"])
    }

    @Test("An unwritable parent fails the whole operation with the original untouched (test 10)", .enabled(if: runsAsRoot))
    func unwritableParent() throws {
        let p = try Playground {
            Directory("locked", mode: 0o755) { File("report", "old") }
            Directory("staging", mode: 0o755) { File("report.new", "new") }
        }
        _ = chown(p["staging"].string, 4242, 4242)
        _ = chown(p["staging/report.new"].string, 4242, 4242)
        let inode = try lstatOf(p["locked/report"]).st_ino
        #expect(throws: FileManagerError.permissionDenied(p["locked/report"].string)) {
            try fm.replaceItem(at: p["locked/report"], withItemAt: p["staging/report.new"], backupItemName: "report~",
                               caller: otherCaller)
        }
        #expect(text(p["locked/report"]) == "old")
        #expect(try lstatOf(p["locked/report"]).st_ino == inode)
        #expect(rawListing(p["locked"]) == ["report"])
        #expect(text(p["staging/report.new"]) == "new")
    }

    @Test("By default the original's mode, creation date and xattrs are kept (test 11)")
    func keepsOriginalMetadata() throws {
        let p = try Playground {
            File("report", "old", mode: 0o600, xattrs: ["user.tag": "blue"])
            File("report.new", "new", mode: 0o644)
        }
        let created = FileTimestamp(seconds: 946_684_800)  // 2000-01-01
        try fm.setAttributes(FileAttributeChanges(creationDate: created), ofItemAtPath: p["report"])
        try fm.replaceItem(at: p["report"], withItemAt: p["report.new"])
        let attributes = try fm.attributesOfItem(atPath: p["report"])
        #expect(text(p["report"]) == "new")
        #expect(attributes.posixPermissions == 0o600)
        #expect(attributes.creationDate == created)
        let fd = open(p["report"].string, O_PATH)
        defer { close(fd) }
        var value = [UInt8](repeating: 0, count: 16)
        let n = try value.withUnsafeMutableBytes { try Syscall.getxattr(pathDescriptor: fd, "user.tag", $0) }
        #expect(String(decoding: value[0..<n], as: UTF8.self) == "blue")
    }

    @Test("usingNewMetadataOnly keeps the new item's mode and creation date (test 11)")
    func usingNewMetadataOnly() throws {
        let p = try Playground {
            File("report", "old", mode: 0o600)
            File("report.new", "new", mode: 0o644)
        }
        try fm.setAttributes(FileAttributeChanges(creationDate: FileTimestamp(seconds: 1)), ofItemAtPath: p["report"])
        let newCreated = try fm.attributesOfItem(atPath: p["report.new"]).creationDate
        try fm.replaceItem(at: p["report"], withItemAt: p["report.new"], options: .usingNewMetadataOnly)
        let attributes = try fm.attributesOfItem(atPath: p["report"])
        #expect(attributes.posixPermissions == 0o644)
        #expect(attributes.creationDate == newCreated)
        #expect(attributes.creationDate != FileTimestamp(seconds: 1))
    }

    @Test("A file replaced by a directory works (test 11)")
    func fileReplacedByDirectory() throws {
        let p = try Playground {
            File("Notes.rtf", "plain", mode: 0o644)
            Directory("Notes.rtfd.new", mode: 0o755) { File("TXT.rtf", "rich") }
        }
        let result = try fm.replaceItem(at: p["Notes.rtf"], withItemAt: p["Notes.rtfd.new"], backupItemName: "Notes.bak")
        #expect(result == p["Notes.rtf"])
        #expect(try lstatOf(p["Notes.rtf"]).st_mode & S_IFMT == S_IFDIR)
        #expect(try lstatOf(p["Notes.rtf"]).st_mode & 0o7777 == 0o755)  // a file's mode would lock the directory
        #expect(text(p["Notes.rtf/TXT.rtf"]) == "rich")
        #expect(rawListing(p.root) == ["Notes.rtf"])
    }

    @Test("Missing items, the same item twice and a bad backup name are refused")
    func refusals() throws {
        let p = try Playground {
            File("a", "a")
            File("b", "b")
        }
        #expect(throws: FileManagerError.noSuchItem(p["missing"].string)) { try fm.replaceItem(at: p["missing"], withItemAt: p["b"]) }
        #expect(throws: FileManagerError.noSuchItem(p["missing"].string)) { try fm.replaceItem(at: p["a"], withItemAt: p["missing"]) }
        #expect(throws: FileManagerError.invalidArgument(p["a"].string)) { try fm.replaceItem(at: p["a"], withItemAt: p["a"]) }
        #expect(throws: FileManagerError.invalidArgument("..")) { try fm.replaceItem(at: p["a"], withItemAt: p["b"], backupItemName: "..") }
        #expect(text(p["a"]) == "a" && text(p["b"]) == "b")
    }
}
