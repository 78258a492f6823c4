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
    @Test func aWalkGoesOnAfterAFailedLookUp() throws {
        let (k, items) = try files(["f", "g"])
        let (replaced, remade) = (items[0], items[1])
        let stale = StaleOpens()
        stale.answered(thread, item: replaced, parent: k.documents.inode, name: "f")
        stale.lookedUp(thread, found: k.documents)      // the walk's directories
        stale.lookedUp(thread, found: nil)              // the revalidation of f: gone
        stale.lookedUp(thread, found: remade)           // f looked up afresh: made again
        let retry = try #require(stale.take(thread))
        #expect(retry.isRetry(of: remade, k.documents.inode, "g"))
        #expect(stale.take(thread) == nil)              // used up by the open
    }

    /// A walk that ended in a failed LOOKUP (the file was deleted) excuses no open of
    /// another file by the thread.
    @Test func aWalkThatFoundNothingExcusesNoOtherFile() throws {
        let (k, items) = try files(["f", "g"])
        let stale = StaleOpens()
        stale.answered(thread, item: items[0], parent: k.documents.inode, name: "f")
        stale.lookedUp(thread, found: nil)
        #expect(stale.take(thread)?.isRetry(of: items[1], k.documents.inode, "g") != true)
    }
}
