import Dispatch
import Synchronization

/// Threads whose OPEN was just answered ESTALE (a name replaced in the store while the
/// kernel had it cached, DESIGN.md 27).
///
/// The VFS retries such an open once, after looking the path up afresh, and hands a second
/// ESTALE to the program. The retry's own OPEN must therefore be served whatever happened
/// in the store since: a file replaced again between the fresh lookup and the open is
/// opened as found, as on any file system where a rename races an open. The kernel sends
/// the retry from the same thread, which is what the request's pid names.
final class StaleOpens: Sendable {
    /// How long a retry is waited for; a walk that failed before its open leaves an entry.
    static let window: UInt64 = 1_000_000_000
    private let retrying = Mutex<[Int32: UInt64]>([:])
    /// Entries in `retrying`: the common OPEN reads this and takes no lock.
    private let count = Atomic<Int>(0)

    /// Records that `pid`'s open is answered ESTALE.
    func answered(_ pid: Int32) {
        let now = DispatchTime.now().uptimeNanoseconds
        let n = retrying.withLock { r -> Int in
            r = r.filter { now &- $0.value < Self.window }
            r[pid] = now
            return r.count
        }
        count.store(n, ordering: .releasing)
    }

    /// Whether this OPEN by `pid` is the retry of one answered ESTALE (consumed).
    func isRetry(_ pid: Int32) -> Bool {
        guard count.load(ordering: .acquiring) > 0 else { return false }
        let now = DispatchTime.now().uptimeNanoseconds
        let (found, n) = retrying.withLock { r -> (Bool, Int) in
            let at = r.removeValue(forKey: pid)
            return (at.map { now &- $0 < Self.window } ?? false, r.count)
        }
        count.store(n, ordering: .releasing)
        return found
    }
}
