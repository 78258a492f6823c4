@testable import FileManagerCore
import Testing

/// The store watcher's gathering rule: short after a pause or an outside change, longer
/// only inside a stream of the daemon's own echoes.
@Suite("Store watcher: gathering events")
struct WatchGatherTests {
    let ms: UInt64 = 1_000_000

    @Test func firstWakeUpGathersBriefly() {
        let gather = WatchGather()
        #expect(gather.microseconds(now: 5 * ms) == WatchGather.normal)
    }

    @Test func aStreamOfOwnEchoesGathersLonger() {
        var gather = WatchGather()
        gather.finished(outside: false, now: 10 * ms)
        #expect(gather.microseconds(now: 10 * ms + 200_000) == WatchGather.streaming)
    }

    @Test func aPauseEndsTheStream() {
        var gather = WatchGather()
        gather.finished(outside: false, now: 10 * ms)
        #expect(gather.microseconds(now: 10 * ms + WatchGather.streamGap) == WatchGather.normal)
        #expect(gather.microseconds(now: 20 * ms) == WatchGather.normal)
    }

    @Test func anOutsideChangeKeepsTheNextWakeUpShort() {
        var gather = WatchGather()
        gather.finished(outside: false, now: 10 * ms)
        gather.finished(outside: true, now: 10 * ms + 100_000)
        #expect(gather.microseconds(now: 10 * ms + 150_000) == WatchGather.normal)
    }
}
