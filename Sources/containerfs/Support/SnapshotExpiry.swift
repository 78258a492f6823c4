import FileManagerCore
import Foundation
import Glibc

/// Removes published snapshots at their expiry time while the daemon serves (docs/DESIGN.md
/// 56). One thread, `cfs-expiry`, sleeps until the earliest `expires` among published
/// snapshots, then removes every snapshot whose time has come through the daemon's
/// `StoreChangeHooks` (so the kernel drops the entry and presenters hear of it), and sleeps
/// again. A publish with an expiry time and a removal wake it (`rearm`) to recompute; with
/// no expiring snapshot it sleeps until woken. What expired while no daemon ran goes at the
/// mount (`Store.settleSnapshots`), before this starts.
final class SnapshotExpiry: @unchecked Sendable {
    /// Guards `changed` and `running`; the thread waits on it.
    private let condition = NSCondition()
    private var changed = false
    private var running = true
    /// The snapshots with the daemon's hooks, made afresh for each round.
    private let snapshots: @Sendable () -> Snapshots

    init(_ snapshots: @escaping @Sendable () -> Snapshots) {
        self.snapshots = snapshots
    }

    func start() {
        Threads.start(named: "cfs-expiry") { [self] in loop() }
    }

    /// Something that may change the earliest expiry time happened: look again.
    func rearm() {
        condition.lock()
        changed = true
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread at its next wake-up. Not waited for: a removal in progress may wait
    /// for a claim (up to the content deadline), and each removal is journaled, so a process
    /// that exits meanwhile leaves nothing half-done (the next open settles it).
    func stop() {
        condition.lock()
        running = false
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        while true {
            let now = Self.now()
            // `list` removes what has expired and answers what is left.
            let next = snapshots().list(now: now).compactMap(\.expires).min()
            // A snapshot still listed past its time could not be removed (a claim's deadline, an
            // I/O error): again in a second, not in a tight loop.
            let wakeAt = next.map { $0 <= now ? now + 1 : $0 }
            condition.lock()
            while running && !changed {
                if let wakeAt {
                    if Self.now() >= wakeAt { break }
                    _ = condition.wait(until: Date(timeIntervalSince1970: wakeAt))
                } else {
                    condition.wait()
                }
            }
            let goOn = running
            changed = false
            condition.unlock()
            if !goOn { return }
        }
    }

    /// Seconds since the epoch, to the nanosecond: the table's times are wall-clock times.
    static func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_REALTIME, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }
}
