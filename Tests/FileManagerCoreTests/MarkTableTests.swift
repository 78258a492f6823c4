@testable import FileManagerCore
import Testing

/// Births and departures are dropped once no unhandled event can need them, without a scan
/// per insertion when none can go.
@Suite("Mark tables")
struct MarkTableTests {
    @Test func recordsTheWatcherHandledGoAtTheNextPrune() {
        var table = MarkTable<Int, Int>()
        for i in 0..<1_024 { table.set(i, i) { _ in true } }
        #expect(table.count == 1_024)
        table.set(5_000, 5_000) { $0 >= 1_000 }           // due: the handled ones go
        #expect(table.count == 25)                          // 1,000...1,023 and the new one
        #expect(table[3] == nil && table[1_010] == 1_010 && table[5_000] == 5_000)
    }

    @Test func aTableNothingCanLeaveIsScannedOnlyWhenItDoubled() {
        var table = MarkTable<Int, Int>()
        var scans = 0
        for i in 0..<4_096 { table.set(i, i) { _ in scans += 1; return true } }
        #expect(table.count == 4_096)
        #expect(scans == 1_024 + 2_048)                     // at 1,024 and at 2,048 entries, not at each
    }
}
