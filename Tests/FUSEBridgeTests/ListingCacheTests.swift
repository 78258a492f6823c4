@testable import FUSEBridge
import FileManagerCore
import Foundation
import Glibc
import SystemPackage
import Testing

/// When the kernel may keep its cached listing of a directory (DESIGN.md 34): never across a
/// change it did not see until every handle that could have fed it the old entries is gone,
/// and not once it forgot the entries, once attributes expired, or after a rescan.
@Suite("Listing cache: what the kernel may keep of a directory's listing")
struct ListingCacheTests {
    let s: UInt64 = 1_000_000_000

    func at(_ seconds: UInt64, forgotten: UInt64 = 0, resets: UInt64 = 0) -> ListingCache.Context {
        ListingCache.Context(now: seconds * s, childrenForgotten: forgotten, resets: resets, maxAge: 60 * s)
    }

    /// Opens one handle (a fresh start's pages are dropped at once) and releases it.
    func list(_ cache: inout ListingCache, _ context: ListingCache.Context) -> ListingCache.Answer {
        let answer = cache.opened(context)
        if case .fresh = answer { cache.dropped() }
        if let g = answer.generation { cache.released(generation: g) }
        return answer
    }

    @Test func aNewDirectoryStartsTheCacheThenKeepsIt() {
        var cache = ListingCache()
        // The first listing fills it: the kernel's inode is as new as the item, so there is
        // nothing to drop.
        #expect(list(&cache, at(1)) == .keep(generation: 0))
        #expect(cache.pendingDrops == 0)
        #expect(list(&cache, at(2)) == .keep(generation: 0))
        #expect(list(&cache, at(3)) == .keep(generation: 0))
        #expect(cache.feeders == 0 && cache.staleFeeders == 0 && cache.pendingDrops == 0)
    }

    @Test func aChangeOutsideStartsTheCacheAfreshOnce() {
        var cache = ListingCache()
        _ = list(&cache, at(1))
        cache.changed()
        #expect(cache.stale)
        #expect(list(&cache, at(2)) == .fresh(generation: 1))
        #expect(list(&cache, at(3)) == .keep(generation: 1))
    }

    @Test func whileAHandleOpenAcrossAChangeLivesNobodyUsesTheCache() {
        var cache = ListingCache()
        _ = list(&cache, at(1))
        // A listing under way reads the directory before the change, and may add what it
        // read to the kernel's cache after the change's invalidation.
        let old = cache.opened(at(2))
        #expect(old == .keep(generation: 0))
        cache.changed()
        #expect(cache.staleFeeders == 1)
        #expect(list(&cache, at(3)) == .uncached)
        #expect(list(&cache, at(4)) == .uncached)
        #expect(cache.feeders == 1)               // uncached handles feed nothing
        cache.released(generation: 0)
        #expect(cache.staleFeeders == 0)
        #expect(list(&cache, at(5)) == .fresh(generation: 1))   // drops what it left
        #expect(list(&cache, at(6)) == .keep(generation: 1))
    }

    @Test func onlyHandlesOpenedBeforeTheLastChangeAreStale() {
        var cache = ListingCache()
        _ = list(&cache, at(1))
        _ = cache.opened(at(2))                   // generation 0
        cache.changed()
        cache.released(generation: 0)
        let second = cache.opened(at(3))          // after the change: reads the new state
        #expect(second == .fresh(generation: 1))
        cache.dropped()
        #expect(cache.feeders == 1 && cache.staleFeeders == 0)
        #expect(list(&cache, at(4)) == .keep(generation: 1))
        cache.changed()                           // now it is older than a change
        #expect(cache.staleFeeders == 1)
        #expect(list(&cache, at(5)) == .uncached)
        cache.released(generation: 1)
        #expect(cache.feeders == 0 && cache.staleFeeders == 0)
        #expect(list(&cache, at(6)) == .fresh(generation: 2))
    }

    @Test func nothingIsKeptUntilTheFreshStartsPagesAreDropped() {
        var cache = ListingCache()
        _ = list(&cache, at(1))
        cache.changed()
        // The daemon answers a fresh start once the kernel dropped its pages: an OPENDIR
        // answered before that would list them.
        #expect(cache.opened(at(2)) == .fresh(generation: 1))
        #expect(cache.opened(at(3)) == .fresh(generation: 1))
        #expect(cache.pendingDrops == 2)
        cache.dropped()
        #expect(list(&cache, at(4)) == .fresh(generation: 1))
        cache.dropped()
        #expect(list(&cache, at(5)) == .keep(generation: 1))
        cache.released(generation: 1)
        cache.released(generation: 1)
        #expect(cache.feeders == 0 && cache.pendingDrops == 0)
    }

    @Test func forgottenEntriesDropTheCacheSoThatReaddirplusPrimesThemAgain() {
        var cache = ListingCache()
        _ = list(&cache, at(1, forgotten: 7))
        #expect(list(&cache, at(2, forgotten: 7)) == .keep(generation: 0))
        #expect(list(&cache, at(3, forgotten: 8)) == .fresh(generation: 0))
        #expect(list(&cache, at(4, forgotten: 8)) == .keep(generation: 0))
    }

    @Test func aListingOlderThanTheAttributeTimeoutIsFilledAgain() {
        var cache = ListingCache()
        _ = list(&cache, at(10))
        #expect(list(&cache, at(69)) == .keep(generation: 0))
        #expect(list(&cache, at(70)) == .fresh(generation: 0))   // 60 s after it was filled
        #expect(list(&cache, at(71)) == .keep(generation: 0))
        var never = ListingCache()
        let zero = ListingCache.Context(now: 5 * s, childrenForgotten: 0, resets: 0, maxAge: 0)
        #expect(list(&never, zero) == .uncached)                 // attr_timeout=0: never kept
        #expect(never.feeders == 0)
    }

    @Test func aRescanIsAChangeOfEveryDirectory() {
        var cache = ListingCache()
        _ = list(&cache, at(1, resets: 3))
        #expect(list(&cache, at(2, resets: 3)) == .keep(generation: 1))
        #expect(list(&cache, at(3, resets: 4)) == .fresh(generation: 2))
        #expect(list(&cache, at(4, resets: 4)) == .keep(generation: 2))
    }

    @Test func aHandleOpenAcrossARescanIsAStaleFeeder() {
        var cache = ListingCache()
        _ = list(&cache, at(1))
        let old = cache.opened(at(2))
        #expect(old == .keep(generation: 0))
        // The rescan is seen at the next open: the handle may hold entries read before it.
        #expect(list(&cache, at(3, resets: 1)) == .uncached)
        #expect(cache.staleFeeders == 1)
        cache.released(generation: 0)
        #expect(list(&cache, at(4, resets: 1)) == .fresh(generation: 1))
        #expect(list(&cache, at(5, resets: 1)) == .keep(generation: 1))
    }
}

/// The wiring through the bridge's node table: what an OPENDIR is answered as the kernel
/// forgets a directory's entries, as a change is announced, as a directory moves.
@Suite("Listing cache through the node table (no mount)")
struct NodeListingCacheTests {
    let minute: UInt64 = 60_000_000_000

    /// A store with one container, through a volume whose kernel side is `nodes`: what the
    /// volume hands out is counted there as given to the kernel.
    final class Kernel {
        let path: String
        let volume: Volume
        let nodes: NodeTable
        let documents: Item

        init() throws {
            var template = Array("/tmp/containerfs-test-XXXXXX".utf8CString)
            path = String(cString: template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }!)
            let nodes = NodeTable()
            let volume = Volume(store: try Store(at: FilePath(path)), keeper: nodes)
            (self.volume, self.nodes) = (volume, nodes)
            volume.addObserver(nodes)
            let containers = try "containers".withCString { try volume.lookup(volume.root, $0) }.0
            let notes = try "com.example.notes".withCString { try volume.mkdir(containers, $0, mode: 0o755, caller: .current) }.0
            documents = try "Documents".withCString { try volume.lookup(notes, $0) }.0
        }

        deinit { _ = try? FileManager.default.removeItem(atPath: path) }

        func node(_ item: Item) throws -> NodeTable.Node { try #require(nodes.node(item.inode)) }
    }

    /// Opens a handle of `dir` as OPENDIR does (a fresh start drops the kernel's pages
    /// first: at once, with no observer) and releases it; whether it was kept.
    func keeps(_ k: Kernel, _ dir: Item) throws -> Bool {
        let node = try k.node(dir)
        let open = OpenDirectory(try k.volume.openDirectory(dir), node: node, listing: k.nodes.openedListing(node, maxAge: minute))
        #expect(open.cachesListing)
        if open.startsListingAfresh { node.listing.withLock { $0.dropped() } }
        return !open.startsListingAfresh
    }

    @Test func answersFollowForgetsChangesAndMoves() throws {
        let k = try Kernel()
        let caller = Caller.current
        let a = try "a".withCString { try k.volume.mkdir(k.documents, $0, mode: 0o755, caller: caller) }.0
        let b = try "b".withCString { try k.volume.mkdir(k.documents, $0, mode: 0o755, caller: caller) }.0
        let file = try "f".withCString { try k.volume.create(a, $0, mode: 0o644, flags: O_WRONLY, caller: caller) }.0

        #expect(try keeps(k, a))   // the first: the kernel has nothing to drop
        #expect(try keeps(k, a))
        // The kernel forgets an entry of `a`: its cached listing primes nothing any more.
        k.nodes.release(file.inode, count: 1)
        #expect(k.nodes.item(file.inode) == nil)
        #expect(try !keeps(k, a))
        #expect(try keeps(k, a))
        // A change the kernel did not see.
        k.volume.listingChanged(a.inode)
        #expect(try !keeps(k, a))
        #expect(try keeps(k, a))
        // A listing under way across a change: nobody uses the cache until it is released.
        let node = try k.node(a)
        var open: OpenDirectory? = OpenDirectory(try k.volume.openDirectory(a), node: node,
                                                 listing: k.nodes.openedListing(node, maxAge: minute))
        #expect(open?.cachesListing == true && open?.startsListingAfresh == false)
        k.volume.listingChanged(a.inode)
        #expect(k.nodes.openedListing(node, maxAge: minute) == .uncached)
        open = nil
        #expect(try !keeps(k, a))
        #expect(try keeps(k, a))
        // Lost events, as the watcher tells them (`VolumeObserver.resync`): every listing.
        (k.nodes as any VolumeObserver).resync()
        #expect(try !keeps(k, a))
        #expect(try keeps(k, a))
        // `a` moves into `b`: it lists another `..`.
        try "a".withCString { n in try k.volume.rename(k.documents, n, b, n, flags: 0) }
        #expect(try !keeps(k, a))
        #expect(try keeps(k, a))
    }

    /// SQLite's journal, made and removed through the mount at every commit: the kernel
    /// forgets it once removed, which leaves nothing for READDIRPLUS to prime, and must not
    /// make the next OPENDIR (SQLite's, to fsync the directory) start afresh.
    @Test func forgettingARemovedEntryKeepsTheListing() throws {
        let k = try Kernel()
        let caller = Caller.current
        #expect(try keeps(k, k.documents))
        for _ in 0..<3 {
            let journal = try "db-journal".withCString {
                try k.volume.create(k.documents, $0, mode: 0o644, flags: O_WRONLY, caller: caller)
            }.0
            try "db-journal".withCString { try k.volume.unlink(k.documents, $0) }
            k.nodes.release(journal.inode, count: 1)
            #expect(try keeps(k, k.documents))
        }
        // A forgotten entry still there counts, as before.
        let kept = try "kept".withCString { try k.volume.create(k.documents, $0, mode: 0o644, flags: O_WRONLY, caller: caller) }.0
        k.nodes.release(kept.inode, count: 1)
        #expect(try !keeps(k, k.documents))
        #expect(try keeps(k, k.documents))
    }
}
