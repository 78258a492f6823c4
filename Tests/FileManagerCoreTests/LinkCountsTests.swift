@testable import FileManagerCore
import Foundation
import Glibc
import Testing

/// Link counts changed in the store (DESIGN.md 14, "Hard links"): inotify tells the
/// directories of a name made or removed, never the count of the file's other names.
@Suite("Link counts changed in the store")
struct LinkCountsTests {
    typealias Fixture = StoreWatcherCatchUpTests.Fixture

    func told(_ f: Fixture) -> [String] {
        f.watcher.readQueue()
        return f.observer.flush()
    }

    @Test func anOutsideLinkAndUnlinkTellOfTheFileTheKernelHolds() throws {
        let f = try Fixture()
        let item = "item \(f.file.inode)"
        #expect(link(f.documentsPath + "/f", f.documentsPath + "/g") == 0)
        #expect(told(f).contains(item))                      // its count went to 2
        #expect(f.volume.items.linkCounts.count == 1)
        #expect(unlink(f.documentsPath + "/g") == 0)
        #expect(told(f).contains(item))                      // and back to 1
        #expect(f.volume.items.linkCounts.count == 0)        // one name: nothing to keep
    }

    @Test func aNameReplacedTellsOfTheFileItLedTo() throws {
        let f = try Fixture()
        let (g, _) = try withName("g") { [f] in
            #expect(link(f.documentsPath + "/f", f.documentsPath + "/g") == 0)
            return try f.volume.lookup(f.documents, $0)      // the kernel holds the file as f and g
        }
        #expect(g === f.file)
        _ = told(f)
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/new", contents: Data("new".utf8))
        #expect(!told(f).contains("item \(f.file.inode)"))  // another file's name: nothing moved
        #expect(rename(f.documentsPath + "/new", f.documentsPath + "/g") == 0)
        #expect(told(f).contains("item \(f.file.inode)"))
    }

    @Test func aRemovalElsewhereTellsNothing() throws {
        let f = try Fixture()
        #expect(link(f.documentsPath + "/f", f.documentsPath + "/g") == 0)
        _ = told(f)
        _ = FileManager.default.createFile(atPath: f.documentsPath + "/other", contents: Data())
        _ = told(f)
        #expect(unlink(f.documentsPath + "/other") == 0)
        #expect(!told(f).contains("item \(f.file.inode)"))
        #expect(f.volume.items.linkCounts.count == 1)
    }

    @Test func recordsAreBoundedAndGoWithTheItem() throws {
        let f = try Fixture()
        var st = stat()
        st.st_mode = S_IFREG | 0o644
        st.st_nlink = 2
        let counts = LinkCounts()
        for inode in 1...UInt64(LinkCounts.limit + 10) { counts.note(inode, st) }
        #expect(counts.count == LinkCounts.limit)
        counts.forget(1)
        #expect(counts.count == LinkCounts.limit - 1)
        st.st_mode = S_IFDIR | 0o755                          // a directory's count is its own business
        counts.note(UInt64(LinkCounts.limit + 20), st)
        #expect(counts.count == LinkCounts.limit - 1)
        // The kernel forgets a hard-linked file: its record goes.
        #expect(link(f.documentsPath + "/f", f.documentsPath + "/g") == 0)
        _ = told(f)
        #expect(f.volume.items.linkCounts.count == 1)
        f.volume.items.forget(f.file.inode, count: 1)
        #expect(f.volume.items.linkCounts.count == 0)
    }
}
