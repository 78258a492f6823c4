@testable import FileManagerCore
import Testing

/// The store watcher's rule for trying again to watch every directory after giving up:
/// after a quarter of the watches end (too many directories) or whatever the count (other
/// causes), 1 s after giving up, then backing off up to 10 min while tries fail.
@Suite("Store watcher: trying again to watch every directory")
struct CompletenessRetryTests {
    let s: UInt64 = 1_000_000_000

    /// A time the rule must not read (it is read only when needed).
    func unread() -> UInt64 {
        Issue.record("the time was read")
        return 0
    }

    @Test func noTryBeforeGivingUp() {
        var retry = CompletenessRetry()
        #expect(retry.due(watchCount: 0, now: unread()) == nil)
        #expect(retry.due(watchCount: 5_000, now: unread()) == nil)
        #expect(retry.below == -1)
        #expect(retry.backoff == 1 * s)
    }

    @Test func tooManyDirectoriesWaitsForAQuarterOfTheWatchesToEnd() {
        var retry = CompletenessRetry()
        retry.gaveUp(watchCount: 1_000, untilFewerWatches: true, firstTime: true, now: 5 * s)
        #expect(retry.below == 750)
        #expect(retry.notBefore == 6 * s)
        // Still 3/4 of the watches or more: none coming, however late.
        #expect(retry.due(watchCount: 1_000, now: unread()) == nil)
        #expect(retry.due(watchCount: 750, now: unread()) == nil)
        // Fewer: waits until 1 s after giving up...
        #expect(retry.due(watchCount: 749, now: 5 * s) == 1 * s)
        #expect(retry.due(watchCount: 749, now: 5 * s + 400_000_000) == 600_000_000)
        #expect(retry.due(watchCount: 749, now: 6 * s - 1) == 1)
        // ...then is due once, and not again until the next give-up.
        #expect(retry.due(watchCount: 749, now: 6 * s) == 0)
        #expect(retry.below == -1)
        #expect(retry.notBefore == 7 * s)
        #expect(retry.backoff == 2 * s)
        #expect(retry.due(watchCount: 749, now: unread()) == nil)
        #expect(retry.due(watchCount: 0, now: unread()) == nil)
    }

    @Test func aQuarterOfFewerThanFourWatches() {
        var retry = CompletenessRetry()
        retry.gaveUp(watchCount: 3, untilFewerWatches: true, firstTime: true, now: 0)
        #expect(retry.below == 2)
        #expect(retry.due(watchCount: 2, now: unread()) == nil)
        #expect(retry.due(watchCount: 1, now: 1 * s) == 0)
    }

    @Test func otherCausesRetryWhateverTheCount() {
        var retry = CompletenessRetry()
        retry.gaveUp(watchCount: 10, untilFewerWatches: false, firstTime: true, now: 2 * s)
        #expect(retry.below == Int.max)
        #expect(retry.due(watchCount: 1_000_000, now: 2 * s) == 1 * s)
        #expect(retry.due(watchCount: 1_000_000, now: 3 * s) == 0)
        #expect(retry.due(watchCount: 1_000_000, now: unread()) == nil)
    }

    @Test func aGiveUpWhileIncompleteKeepsTheTime() {
        var retry = CompletenessRetry()
        retry.gaveUp(watchCount: 1_000, untilFewerWatches: true, firstTime: true, now: 10 * s)
        // Another directory, already incomplete: the time is neither read nor moved; the
        // count at this give-up sets the threshold.
        retry.gaveUp(watchCount: 400, untilFewerWatches: true, firstTime: false, now: unread())
        #expect(retry.notBefore == 11 * s)
        #expect(retry.below == 300)
        #expect(retry.due(watchCount: 299, now: 10 * s + 900_000_000) == 100_000_000)
        // A later cause that is not the count: whatever the count.
        retry.gaveUp(watchCount: 400, untilFewerWatches: false, firstTime: false, now: unread())
        #expect(retry.below == Int.max)
        #expect(retry.notBefore == 11 * s)
        #expect(retry.due(watchCount: 400, now: 11 * s) == 0)
    }

    @Test func failingTriesBackOffDoublingUpToTenMinutes() {
        var retry = CompletenessRetry()
        retry.gaveUp(watchCount: 100, untilFewerWatches: false, firstTime: true, now: 0)
        var tries: [UInt64] = []
        var backoffs: [UInt64] = []
        var now: UInt64 = 0
        for _ in 0..<13 {
            guard let wait = retry.due(watchCount: 100, now: now) else {
                Issue.record("no try coming")
                return
            }
            now += wait
            #expect(retry.due(watchCount: 100, now: now) == 0)
            tries.append(now / s)
            backoffs.append(retry.backoff / s)
            // The try fails: still incomplete, so the time it set stands.
            retry.gaveUp(watchCount: 100, untilFewerWatches: false, firstTime: false, now: unread())
        }
        #expect(tries == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1624, 2224])
        #expect(backoffs == [2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600, 600, 600])
        #expect(CompletenessRetry.longestWait == 600 * s)
    }

    @Test func successStartsOverAtOneSecond() {
        var retry = CompletenessRetry()
        retry.gaveUp(watchCount: 100, untilFewerWatches: false, firstTime: true, now: 0)
        #expect(retry.due(watchCount: 100, now: 1 * s) == 0)
        retry.gaveUp(watchCount: 100, untilFewerWatches: false, firstTime: false, now: unread())
        #expect(retry.due(watchCount: 100, now: 2 * s) == 0)
        #expect(retry.backoff == 4 * s)
        retry.succeeded()
        #expect(retry.backoff == 1 * s)
        #expect(retry.below == -1)
        #expect(retry.due(watchCount: 0, now: unread()) == nil)
        // Giving up again, later: 1 s again.
        retry.gaveUp(watchCount: 100, untilFewerWatches: true, firstTime: true, now: 50 * s)
        #expect(retry.notBefore == 51 * s)
        #expect(retry.due(watchCount: 74, now: 50 * s) == 1 * s)
        #expect(retry.due(watchCount: 74, now: 51 * s) == 0)
        #expect(retry.backoff == 2 * s)
    }

    @Test func aSuccessAfterAGiveUpLeavesNoTryComing() {
        var retry = CompletenessRetry()
        retry.gaveUp(watchCount: 100, untilFewerWatches: false, firstTime: true, now: 0)
        // An overflow's rescan watched every directory before the try came.
        retry.succeeded()
        #expect(retry.due(watchCount: 0, now: unread()) == nil)
        #expect(retry.backoff == 1 * s)
    }

    // MARK: - The budget

    @Test(arguments: zip([UInt64(0), 300, 1_024, 2_048, 4_096, 5_000, 20_000, 1_048_576, 4_000_000, 8_000_000, UInt64.max],
                         [0, 150, 512, 1_024, 1_024, 1_250, 5_000, 262_144, 1_000_000, 1_000_000, 1_000_000]))
    func budgetIsAQuarterOfTheDescriptorsAtLeast1024AtMostHalf(descriptorLimit: UInt64, budget: Int) {
        #expect(WatchBudget.directories(descriptorLimit: descriptorLimit, watchLimit: Int.max) == budget)
    }

    @Test func budgetStaysWithinTheWatchLimit() {
        #expect(WatchBudget.directories(descriptorLimit: 20_000, watchLimit: 1_024) == 1_024)
        #expect(WatchBudget.directories(descriptorLimit: 1_048_576, watchLimit: 4_096) == 4_096)
        #expect(WatchBudget.directories(descriptorLimit: 1_048_576, watchLimit: 262_144) == 262_144)
        #expect(WatchBudget.directories(descriptorLimit: 1_048_576, watchLimit: 262_143) == 262_143)
        #expect(WatchBudget.directories(descriptorLimit: 300, watchLimit: 1_024) == 150)
        #expect(WatchBudget.directories(descriptorLimit: 2_048, watchLimit: 8_192) == 1_024)
    }
}
