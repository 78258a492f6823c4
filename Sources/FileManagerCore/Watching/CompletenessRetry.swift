/// When the store watcher, having given up watching every directory of the store, tries
/// again to watch them all.
///
/// While some directory goes unwatched the mount uses short cache timeouts, so the watcher
/// does not stay incomplete for good after a burst of directories: it tries again. But a
/// try walks the whole store, so it is made only when it may succeed, and less and less
/// often while it does not:
///
///  - when the cause was too many directories (the budget), only once a quarter of the
///    watches have ended: before that the store is as big as when the watcher gave up.
///    Other causes (descriptors, the inotify limit) end elsewhere, whatever the count;
///  - not before 1 s after giving up; each try pushes the next one further off, twice as
///    far each time up to 10 min, so a store that stays too big is not walked again and
///    again;
///  - a try that watches every directory starts over at 1 s.
///
/// Times are monotonic nanoseconds (`OwnChanges.now()`), read only when the rule needs
/// them: the watcher asks after every batch of events. `StoreWatcher` keeps one, with
/// `draining` held, and does the try itself.
struct CompletenessRetry {
    /// The wait after giving up, and the first step of the back-off.
    static let shortestWait: UInt64 = 1_000_000_000
    /// Where the back-off stops doubling.
    static let longestWait: UInt64 = 600_000_000_000

    /// Below this many watches a try is coming (-1: none; Int.max: whatever the count)...
    private(set) var below = -1
    /// ...but not before this time...
    private(set) var notBefore: UInt64 = 0
    /// ...and after the next try, the one after waits this long.
    private(set) var backoff: UInt64 = CompletenessRetry.shortestWait

    /// Some directory went unwatched, with `watchCount` directories watched.
    /// `untilFewerWatches`: the cause was too many directories, so the next try waits for a
    /// quarter of the watches to end. `firstTime`: the watcher was complete until now, and
    /// the wait starts; a give-up while already incomplete (a try that failed, another
    /// directory) keeps the time already set (a try set it when it began).
    mutating func gaveUp(watchCount: Int, untilFewerWatches: Bool, firstTime: Bool, now: @autoclosure () -> UInt64) {
        below = untilFewerWatches ? watchCount * 3 / 4 : Int.max
        if firstTime { notBefore = now() &+ backoff }
    }

    /// Whether a try to watch every directory is due now, with `watchCount` directories
    /// watched: 0 due (the caller makes it; none is due again until the next give-up), nil
    /// none coming (complete, or still too many watches), else nanoseconds to wait.
    mutating func due(watchCount: Int, now: @autoclosure () -> UInt64) -> UInt64? {
        guard below >= 0, watchCount < below else { return nil }
        let now = now()
        if now < notBefore { return notBefore - now }
        below = -1
        notBefore = now &+ backoff
        backoff = min(backoff * 2, Self.longestWait)
        return 0
    }

    /// A try watched every directory: complete again, and a later give-up waits 1 s again.
    mutating func succeeded() {
        below = -1
        backoff = Self.shortestWait
    }
}
