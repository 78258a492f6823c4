@testable import FileManagerCore
import Testing

/// The store watcher's gathering rule (DESIGN.md 25): short after a pause or an outside change, longer
/// only inside a stream of the daemon's own events.
@Suite("Store watcher: gathering events")
struct GatheringTests {
    let ms: UInt64 = 1_000_000

    @Test func firstWakeUpGathersBriefly() {
        let gather = Gathering()
        #expect(gather.microseconds(now: 5 * ms) == Gathering.normal)
    }

    @Test func aStreamOfOwnEchoesGathersLonger() {
        var gather = Gathering()
        gather.finished(outside: false, now: 10 * ms)
        #expect(gather.microseconds(now: 10 * ms + 200_000) == Gathering.streaming)
    }

    @Test func aPauseEndsTheStream() {
        var gather = Gathering()
        gather.finished(outside: false, now: 10 * ms)
        #expect(gather.microseconds(now: 10 * ms + Gathering.streamGap) == Gathering.normal)
        #expect(gather.microseconds(now: 20 * ms) == Gathering.normal)
    }

    @Test func anOutsideChangeKeepsTheNextWakeUpShort() {
        var gather = Gathering()
        gather.finished(outside: false, now: 10 * ms)
        gather.finished(outside: true, now: 10 * ms + 100_000)
        #expect(gather.microseconds(now: 10 * ms + 150_000) == Gathering.normal)
    }
}
