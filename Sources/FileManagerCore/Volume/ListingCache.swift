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
/// A kept listing is also not the best answer when the kernel no longer holds the entries
/// it names: READDIRPLUS, which only an uncached listing sends, would have primed them in
/// one request per buffer (an `ls -l` after the kernel forgot the children, or after their
/// attributes expired). The cache is then dropped too, and filled again by the listing that
/// follows.
///
/// Pure state, kept under the directory item's lock; times and counters are given by the
/// caller, so the rules are tested without a mount.
struct ListingCache: Equatable {
    /// Bumped by every change the kernel did not make itself: a handle opened at an earlier
    /// generation is a stale feeder once it is older than a change.
    private(set) var generation: UInt64 = 0
    /// The kernel's cached listing (if any) may differ from the store's.
    private(set) var stale = true
    /// Handles opened with `FOPEN_CACHE_DIR` and not yet released.
    private(set) var feeders = 0
    /// Of those, the ones opened before the last change.
    private(set) var staleFeeders = 0
    /// When the kernel last started a fresh cache, and what was counted then.
    private var startedAt: UInt64 = 0
    private var forgottenAtStart: UInt64 = 0
    private var resetsAtStart: UInt64 = 0

    /// What counts at an OPENDIR besides this directory's own history.
    struct Context {
        /// Now, in nanoseconds of a monotonic clock.
        var now: UInt64
        /// How often the kernel forgot an item last seen in this directory, ever.
        var childrenForgotten: UInt64
        /// Bumped when every listing may have changed unseen (a rescan of the store).
        var resets: UInt64
        /// How long attributes the kernel was given stay valid: a listing older than that
        /// primes nothing a new READDIRPLUS would not prime again.
        var maxAge: UInt64
    }

    /// An OPENDIR with `FOPEN_CACHE_DIR`: whether the kernel may keep (and list from) what
    /// it cached, and the generation the handle remembers for `released`.
    mutating func opened(_ context: Context) -> (keep: Bool, generation: UInt64) {
        feeders += 1
        let keep = !stale && context.resets == resetsAtStart && context.childrenForgotten == forgottenAtStart
            && context.now &- startedAt < context.maxAge
        if !keep && staleFeeders == 0 {
            // The kernel drops its pages at this open; what is cached from now on comes from
            // READDIRs that ran after every change seen so far.
            stale = false
            startedAt = context.now
            forgottenAtStart = context.childrenForgotten
            resetsAtStart = context.resets
        }
        return (keep, generation)
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
