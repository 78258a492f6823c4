@testable import FileManagerCore
import Testing

/// The ring of items the store watcher lately found changed outside the mount, asked by a
/// look-up whether the state it read may predate one of them.
@Suite("Store watcher: items changed outside, for look-ups racing them")
struct OutsideItemChangesTests {
    @Test func onlyAnItemNotedSinceCounts() {
        let changes = OutsideItemChanges()
        changes.note(7)                                      // before the look-up began
        let since = changes.sequence.load(ordering: .relaxed)
        #expect(!changes.changed(7, since: since))
        changes.note(8)
        changes.note(9)
        #expect(changes.changed(8, since: since))
        #expect(changes.changed(9, since: since))
        #expect(!changes.changed(7, since: since))
    }

    /// A look-up overtaken by more changes than the ring holds cannot tell: it reads again.
    @Test func aLookUpFurtherBehindThanTheRingReadsAgain() {
        let changes = OutsideItemChanges()
        let since = changes.sequence.load(ordering: .relaxed)
        for inode in 100..<UInt64(100 + OutsideItemChanges.capacity) { changes.note(inode) }
        #expect(!changes.changed(7, since: since))           // all of them still in the ring
        changes.note(8)
        #expect(changes.changed(7, since: since))            // one more: the first fell out
    }

    @Test func aRescanMakesEveryLookUpUnderWayReadAgain() {
        let changes = OutsideItemChanges()
        let since = changes.sequence.load(ordering: .relaxed)
        changes.noteEverything()
        #expect(changes.changed(7, since: since))
        #expect(!changes.changed(7, since: changes.sequence.load(ordering: .relaxed)))
    }
}
