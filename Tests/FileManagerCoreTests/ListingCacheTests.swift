import Glibc
@testable import FileManagerCore
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

    /// Opens and releases one handle; returns whether the kernel could keep its cache.
    func list(_ cache: inout ListingCache, _ context: ListingCache.Context) -> Bool {
        let (keep, generation) = cache.opened(context)
        cache.released(generation: generation)
        return keep
    }

    @Test func aNewDirectoryStartsTheCacheThenKeepsIt() {
        var cache = ListingCache()
        #expect(!list(&cache, at(1)))   // the first listing fills the cache
        #expect(list(&cache, at(2)))
        #expect(list(&cache, at(3)))
        #expect(cache.feeders == 0 && cache.staleFeeders == 0)
    }

    @Test func aChangeOutsideDropsTheCacheOnce() {
        var cache = ListingCache()
        _ = list(&cache, at(1))
        cache.changed()
        #expect(cache.stale)
        #expect(!list(&cache, at(2)))   // dropped at this open, filled by it
        #expect(list(&cache, at(3)))
    }

    @Test func aHandleOpenAcrossAChangeKeepsTheCacheDroppedUntilItIsReleased() {
        var cache = ListingCache()
        _ = list(&cache, at(1))
        // A listing under way reads the directory before the change, and may add what it
        // read to the kernel's cache after the change's invalidation.
        let (kept, old) = cache.opened(at(2))
        #expect(kept)
        cache.changed()
        #expect(cache.staleFeeders == 1)
        // Every open meanwhile drops the cache: the old handle may have refilled it.
        #expect(!list(&cache, at(3)))
        #expect(!list(&cache, at(4)))
        #expect(cache.stale)
        cache.released(generation: old)
        #expect(cache.staleFeeders == 0)
        #expect(!list(&cache, at(5)))   // this one drops what the old handle left
        #expect(list(&cache, at(6)))
    }

    @Test func onlyHandlesOpenedBeforeTheLastChangeAreStale() {
        var cache = ListingCache()
        _ = list(&cache, at(1))
        let (_, first) = cache.opened(at(2))
        cache.changed()
        let (_, second) = cache.opened(at(3))   // opened after the change: reads the new state
        #expect(cache.feeders == 2 && cache.staleFeeders == 1)
        cache.changed()                         // now both are older than a change
        #expect(cache.staleFeeders == 2)
        cache.released(generation: second)
        cache.released(generation: first)
        #expect(cache.feeders == 0 && cache.staleFeeders == 0)
        #expect(!list(&cache, at(4)))
        #expect(list(&cache, at(5)))
    }

    @Test func aHandleOpenedAfterTheLastChangeDoesNotHoldTheCacheBack() {
        var cache = ListingCache()
        _ = list(&cache, at(1))
        cache.changed()
        let (kept, current) = cache.opened(at(2))
        #expect(!kept)
        #expect(list(&cache, at(3)))            // while `current` is still open
        cache.released(generation: current)
        #expect(cache.staleFeeders == 0)
    }

    @Test func forgottenEntriesDropTheCacheSoThatReaddirplusPrimesThemAgain() {
        var cache = ListingCache()
        _ = list(&cache, at(1, forgotten: 7))
        #expect(list(&cache, at(2, forgotten: 7)))
        #expect(!list(&cache, at(3, forgotten: 8)))
        #expect(list(&cache, at(4, forgotten: 8)))
    }

    @Test func aListingOlderThanTheAttributeTimeoutIsFilledAgain() {
        var cache = ListingCache()
        _ = list(&cache, at(10))
        #expect(list(&cache, at(69)))
        #expect(!list(&cache, at(70)))          // 60 s after the listing that filled it
        #expect(list(&cache, at(71)))
        var never = ListingCache()
        let zero = ListingCache.Context(now: 5 * s, childrenForgotten: 0, resets: 0, maxAge: 0)
        _ = list(&never, zero)
        #expect(!list(&never, zero))            // attr_timeout=0: nothing is kept
    }

    @Test func aRescanDropsEveryCache() {
        var cache = ListingCache()
        _ = list(&cache, at(1, resets: 3))
        #expect(list(&cache, at(2, resets: 3)))
        #expect(!list(&cache, at(3, resets: 4)))
        #expect(list(&cache, at(4, resets: 4)))
    }
}

/// The wiring in the volume: what an OPENDIR is answered, as the kernel forgets a
/// directory's entries, as a change is announced, as a directory moves.
@Suite("Listing cache through the volume (no mount)")
struct VolumeListingCacheTests {
    let minute: UInt64 = 60_000_000_000

    /// Opens and releases a handle of `dir`; whether the kernel may keep its listing.
    func keeps(_ volume: Volume, _ dir: Item) throws -> Bool {
        let handle = try volume.openDirectory(dir, listingMaxAge: minute)
        return try #require(handle.listing).keep
    }

    @Test func answersFollowForgetsChangesAndMoves() throws {
        let t = try TemporaryStore()
        let volume = Volume(store: t.store)
        let caller = Caller.current
        let (containers, _) = try withName("containers") { try volume.lookup(volume.root, $0) }
        let (notes, _) = try withName("com.example.notes") { try volume.mkdir(containers, $0, mode: 0o755, caller: caller) }
        let (documents, _) = try withName("Documents") { try volume.lookup(notes, $0) }
        let (a, _) = try withName("a") { try volume.mkdir(documents, $0, mode: 0o755, caller: caller) }
        let (b, _) = try withName("b") { try volume.mkdir(documents, $0, mode: 0o755, caller: caller) }
        let (file, _, handle) = try withName("f") { try volume.create(a, $0, mode: 0o644, flags: O_WRONLY, caller: caller) }
        _ = handle

        #expect(try volume.openDirectory(a).listing == nil)   // not coherent: nothing cached
        #expect(try !keeps(volume, a))
        #expect(try keeps(volume, a))
        // The kernel forgets an entry of `a`: its cached listing primes nothing any more.
        volume.items.forget(file.inode, count: 1)
        #expect(volume.item(file.inode) == nil)
        #expect(try !keeps(volume, a))
        #expect(try keeps(volume, a))
        // A change the kernel did not see.
        volume.listingChanged(a.inode)
        #expect(try !keeps(volume, a))
        #expect(try keeps(volume, a))
        // A listing under way across a change holds the cache back until it is released.
        var open: DirectoryHandle? = try volume.openDirectory(a, listingMaxAge: minute)
        #expect(open?.listing?.keep == true)
        volume.listingChanged(a.inode)
        #expect(try !keeps(volume, a))
        #expect(try !keeps(volume, a))
        open = nil
        #expect(try !keeps(volume, a))
        #expect(try keeps(volume, a))
        // `a` moves into `b`: it lists another `..`.
        try withName("a") { n in try volume.rename(documents, n, b, n, flags: 0) }
        #expect(try !keeps(volume, a))
        #expect(try keeps(volume, a))
        withExtendedLifetime(open) {}
    }
}
