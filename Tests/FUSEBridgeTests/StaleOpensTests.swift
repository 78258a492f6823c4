import FileManagerCore
import Glibc
import SystemPackage
import Testing
@testable import FUSEBridge

/// The retry of an OPEN answered ESTALE, recognised by the thread's LOOKUPs in between
/// (`StaleOpens`, DESIGN.md 27).
@Suite("Stale opens (no mount)")
struct StaleOpensTests {
    let thread: Int32 = 4242

    /// A store with a replaced file `f` (answered ESTALE) and the files found under the
    /// name afterwards.
    func files(_ names: [String]) throws -> (NodeListingCacheTests.Kernel, [Item]) {
        let k = try NodeListingCacheTests.Kernel()
        let items = try names.map { name in
            try name.withCString { try k.volume.create(k.documents, $0, mode: 0o644, flags: O_WRONLY, caller: .current) }.0
        }
        return (k, items)
    }

    /// The kernel's revalidation of the name finds it gone, and its look-up afresh finds
    /// the file the store made again in between: that is what the retry opens.
    @Test func aWalkGoesOnAfterAFailedRevalidation() throws {
        let (k, items) = try files(["f", "g"])
        let (replaced, remade) = (items[0], items[1])
        let stale = StaleOpens()
        stale.answered(thread, item: replaced, parent: k.documents.inode, name: "f")
        lookedUp(stale, k.documents.inode, "f", nil)        // the revalidation of f: gone
        lookedUp(stale, k.documents.inode, "f", remade)     // f looked up afresh: made again
        let retry = try #require(stale.take(thread))
        #expect(retry.isRetry(of: remade, k.documents.inode, "g"))
        #expect(stale.take(thread) == nil)                  // used up by the open
    }

    /// A walk that ended in a failed LOOKUP (the file was deleted) excuses no later open,
    /// whatever the thread looks up before it.
    @Test func aWalkThatFoundNothingExcusesNoLaterOpen() throws {
        let (k, items) = try files(["f", "g"])
        let stale = StaleOpens()
        stale.answered(thread, item: items[0], parent: k.documents.inode, name: "f")
        lookedUp(stale, k.documents.inode, "f", nil)
        #expect(stale.take(thread) == nil)
        stale.answered(thread, item: items[0], parent: k.documents.inode, name: "f")
        lookedUp(stale, k.documents.inode, "f", nil)
        lookedUp(stale, k.documents.inode, "g", items[1])   // another name: another walk
        #expect(stale.take(thread) == nil)
        stale.answered(thread, item: items[0], parent: k.documents.inode, name: "f")
        lookedUp(stale, k.documents.inode, "f", nil)
        lookedUp(stale, k.documents.inode, "f", nil)        // looked up afresh: still gone
        lookedUp(stale, k.documents.inode, "f", items[1])
        #expect(stale.take(thread) == nil)
    }

    func lookedUp(_ stale: StaleOpens, _ parent: UInt64, _ name: String, _ found: Item?) {
        name.withCString { stale.lookedUp(thread, parent: parent, name: $0, found: found) }
    }
}
