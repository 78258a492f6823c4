/// How many directories of the store the watcher may watch; past that, it gives up
/// watching every directory (short cache timeouts) rather than starve the daemon.
enum WatchBudget {
    /// The budget for a descriptor limit (RLIMIT_NOFILE, soft) and a share of the inotify
    /// watches (`watchLimit`). Each watched directory holds a descriptor, so at most a
    /// quarter of the descriptor limit (1,024 at least, never more than half), leaving the
    /// rest to the items the kernel holds, and at most `watchLimit`. A limit above 4,000,000
    /// (or unlimited) counts as 4,000,000.
    static func directories(descriptorLimit: UInt64, watchLimit: Int) -> Int {
        let most = Int(min(descriptorLimit, 4_000_000))
        return min(max(min(1024, most / 2), most / 4), watchLimit)
    }
}
