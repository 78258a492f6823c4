/// What the daemon knows of the kernel's cached listing of one directory (DESIGN.md 34).
///
/// An OPENDIR answered with `FOPEN_CACHE_DIR` lets the kernel keep what the handle's
/// READDIRs bring in the directory's page cache; `FOPEN_KEEP_CACHE` on a later OPENDIR lets
/// it list from that cache, with no request at all. The kernel drops the cache itself when a
/// change goes through the mount (create, unlink, rename, link in the directory bump its
/// `i_version`), and at an OPENDIR answered without `FOPEN_KEEP_CACHE`. Everything else
/// is this type's to know: a change made in the store outside the mount, which the kernel
/// never sees, and whether a cached listing is still the best answer.
///
/// A change made outside makes every handle open at that moment a *stale feeder*: its
/// READDIRs may have read the directory before the change and may still add those entries
/// to the kernel's cache after the change's invalidation (the kernel adds them when the
/// caller runs, after the daemon's answer). So the cache is kept only once an OPENDIR that
/// dropped it came after every stale feeder had been released.
///
/// While a stale feeder is open, new handles do not use the cache at all (no
/// `FOPEN_CACHE_DIR`: their listings go to the daemon, as before this cache existed), and
/// the first OPENDIR after the last of them is released starts the cache afresh.
///
/// Starting afresh means dropping the kernel's pages *before* the OPENDIR is answered: the
/// daemon has them invalidated (`Volume.afterInvalidating`) and answers once that is
/// done, with `FOPEN_KEEP_CACHE` (the kernel's own drop at an open without it would come
/// after the answer, and an OPENDIR answered meanwhile could list the old pages). Until the
/// invalidation is done, every other OPENDIR starts afresh too (`pendingDrops`).
///
/// A kept listing is also not the best answer when the kernel no longer holds the entries
/// it names: READDIRPLUS, which only an uncached listing sends, would have primed them in
/// one request per buffer (an `ls -l` after the kernel forgot the children, or after their
/// attributes expired). The cache is then dropped too, and filled again by the listing that
/// follows.
///
/// Pure state, kept under the directory node's lock (`NodeTable.Node`); times and counters
/// are given by the caller, so the rules are tested without a mount.
struct ListingCache {
    /// What an OPENDIR is answered.
    enum Answer: Equatable {
        /// No `FOPEN_CACHE_DIR`: a stale feeder is open (or nothing would be kept).
        case uncached
        /// `FOPEN_CACHE_DIR` and `FOPEN_KEEP_CACHE`: list from what the kernel has.
        case keep(generation: UInt64)
        /// The same once the kernel's pages were dropped; `dropped()` when they are.
        case fresh(generation: UInt64)

        /// The generation the handle gives back at `released`; nil: not a feeder.
        var generation: UInt64? {
            switch self {
            case .uncached: nil
            case .keep(let g), .fresh(let g): g
            }
        }
    }

    /// Bumped by every change the kernel did not make itself: a handle opened at an earlier
    /// generation is a stale feeder once it is older than a change.
    private(set) var generation: UInt64 = 0
    /// The kernel's cached listing (if any) may differ from the store's.
    private(set) var stale = true
    /// Handles opened with `FOPEN_CACHE_DIR` and not yet released.
    private(set) var feeders = 0
    /// Of those, the ones opened before the last change.
    private(set) var staleFeeders = 0
    /// Fresh starts whose invalidation of the kernel's pages is not done yet.
    private(set) var pendingDrops = 0
    /// `Context.resets` as last seen: lost events are a change like any other.
    private var resetsSeen: UInt64 = 0
    /// A handle asked for the cache before: until then the kernel has no pages to drop (the
    /// item is as old as the kernel's inode, which is made by the look-up that made it).
    private var everCached = false
    /// When the kernel last started a fresh cache, and what was counted then.
    private var startedAt: UInt64 = 0
    private var forgottenAtStart: UInt64 = 0

    /// What counts at an OPENDIR besides this directory's own history.
    struct Context {
        /// Now, in nanoseconds of a monotonic clock.
        var now: UInt64
        /// How often the kernel forgot an item last seen in this directory, ever.
        var childrenForgotten: UInt64
        /// Bumped when every listing may have changed unseen (the watcher lost events).
        var resets: UInt64
        /// How long attributes the kernel was given stay valid: a listing older than that
        /// primes nothing a new READDIRPLUS would not prime again.
        var maxAge: UInt64
    }

    /// An OPENDIR: whether it may use the kernel's cache, and how.
    mutating func opened(_ context: Context) -> Answer {
        // attr_timeout=0: nothing would ever be kept.
        if context.maxAge == 0 { return .uncached }
        if context.resets != resetsSeen {
            // Every handle open now may hold entries read before the changes that went unheard.
            resetsSeen = context.resets
            changed()
        }
        if staleFeeders > 0 { return .uncached }
        feeders += 1
        if !stale && pendingDrops == 0 && context.childrenForgotten == forgottenAtStart
            && context.now &- startedAt < context.maxAge {
            return .keep(generation: generation)
        }
        // Every READDIR of the handles that fill the cache from now on runs after every
        // change seen so far.
        stale = false
        startedAt = context.now
        forgottenAtStart = context.childrenForgotten
        if !everCached {
            everCached = true
            return .keep(generation: generation)
        }
        pendingDrops += 1
        return .fresh(generation: generation)
    }

    /// The kernel's pages were dropped for a fresh start.
    mutating func dropped() {
        pendingDrops -= 1
    }

    /// The handle opened at `generation` is gone: it adds nothing to the cache any more.
    mutating func released(generation opened: UInt64) {
        feeders -= 1
        if opened != generation { staleFeeders -= 1 }
    }

    /// The directory's entries changed without the kernel seeing it.
    mutating func changed() {
        generation &+= 1
        stale = true
        staleFeeders = feeders
    }
}
