/// How long the store watcher lets events gather after a wake-up before it reads them.
///
/// Every change the daemon makes comes back as an inotify echo; a metadata-heavy workload
/// through the mount (10,000 renames) would wake the watcher once per change, a context
/// switch each on a machine whose cores are busy with the workload and the FUSE workers.
/// Gathering trades latency for wake-ups, and the latency is that of *outside* changes
/// reaching the kernel's caches, so it stays short unless the watcher is plainly in the
/// middle of a stream of its own echoes:
///
///  - normally 100 µs: below what a reader's next system call takes to start;
///  - 1 ms while streaming: the previous batch held only the daemon's own echoes and the
///    next one began within 500 µs of it. An outside change made during such a stream
///    reaches the kernel at most 1 ms later (an OPEN catches up with it at once: DESIGN.md
///    27); one made after a pause, at once as before.
struct WatchGather {
    static let normal: UInt32 = 100
    static let streaming: UInt32 = 1_000
    /// Nanoseconds between batches that still count as one stream.
    static let streamGap: UInt64 = 500_000

    private var lastBatchEnd: UInt64 = 0
    private var lastBatchWasOwn = false

    /// The gather time for a wake-up at `now` (monotonic nanoseconds).
    func microseconds(now: UInt64) -> UInt32 {
        return lastBatchWasOwn && now &- lastBatchEnd < Self.streamGap ? Self.streaming : Self.normal
    }

    /// A batch was handled; `outside`: it held a change made outside the mount.
    mutating func finished(outside: Bool, now: UInt64) {
        lastBatchWasOwn = !outside
        lastBatchEnd = now
    }
}
